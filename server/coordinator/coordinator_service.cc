#include "server/coordinator/coordinator_service.h"

#include <algorithm>

#include "common/format_double.h"
#include "common/log.h"
#include "rpc/incarnation_trailer.h"
#include "rpc/rpc_status.h"
#include "security/call_identity.h"

namespace loco {

namespace {

// A random key, or none when the system's generator fails (then Join issues
// no ticket and only ConfigureAccess can supply a key).
std::optional<WorkerTicketKey> RandomTicketKey() {
  auto key = WorkerTicketKey::Random();
  if (!key.ok()) {
    LOG_ERROR(key.status().ToString());
    return std::nullopt;
  }
  return std::move(key).value();
}

}  // namespace

CoordinatorService::CoordinatorService(const CoordinatorOptions& options, Membership::Clock clock)
    : options_(options),
      membership_(options.membership, clock),
      // A whole cluster at once, plus a second's worth.
      join_rate_(options.max_joins_per_second,
                 static_cast<double>(options.membership.max_workers) +
                     std::max(1.0, options.max_joins_per_second),
                 clock),
      tickets_(RandomTicketKey()) {}

void CoordinatorService::ConfigureAccess(std::shared_ptr<const RolePolicy> roles,
                                         WorkerTicketKey tickets) {
  roles_ = std::move(roles);
  tickets_ = std::move(tickets);
}

CallerIdentity CoordinatorService::Caller(const grpc::ServerContext* ctx) const {
  if (ctx != nullptr) return IdentifyCaller(*ctx, roles_.get());
  CallerIdentity both;  // a direct call in a test: no credentials to check
  both.worker = both.server = true;
  return both;
}

Status CoordinatorService::CheckRole(const grpc::ServerContext* ctx, CallerRole role,
                                     const char* rpc) const {
  return AuthorizeRole(Caller(ctx), role, rpc);
}

Status CoordinatorService::CheckTicket(uint64_t worker_id, const std::string& ticket,
                                       const char* rpc) const {
  if (worker_id == 0) {
    return InvalidArgument(std::string(rpc) + ": worker_id 0 names no worker; send the id " +
                           "Join returned");
  }
  if (membership_.FromEarlierIncarnation(worker_id) && options_.ticket_key_file.empty()) {
    // Its ticket was made with the previous process's random key: nothing
    // can prove the id is the caller's, so it cannot resume under it.
    return NotFound(std::string(rpc) + ": worker " + std::to_string(worker_id) + " joined an "
                    "earlier start of this coordinator, which ran without --ticket-key-file; "
                    "join again");
  }
  if (membership_.FromEarlierIncarnation(worker_id) && ticket.empty()) {
    // Resuming re-admits an id this process never issued: only the ticket
    // its Join returned vouches for it, whether or not roles are separated
    // (every Join returns one, and every worker sends it).
    return NotFound(std::string(rpc) + ": worker " + std::to_string(worker_id) +
                    " joined an "
                    "earlier start of this coordinator and carries no ticket to prove it; "
                    "join again");
  }
  const bool required = roles_ && roles_->separated();
  if (ticket.empty() && !required) return Status::Ok();
  if (ticket.empty()) {
    return PermissionDenied(std::string(rpc) + " for worker " + std::to_string(worker_id) +
                            " carries no ticket; a worker acts only as itself, with the ticket "
                            "its Join returned");
  }
  if (!tickets_ || !tickets_->Verify(worker_id, ticket)) {
    return PermissionDenied(std::string(rpc) + ": the ticket is not worker " +
                            std::to_string(worker_id) +
                            "'s (a worker acts only as itself; after a coordinator restart "
                            "without --ticket-key-file, join again)");
  }
  return Status::Ok();
}

grpc::Status CoordinatorService::Reject(const char* rpc, const Status& status) {
  if (options_.metrics) options_.metrics->OnRejected(rpc, status);
  return ToGrpcStatus(status);
}

void CoordinatorService::RefreshMetrics() {
  if (!options_.metrics) return;
  std::lock_guard<std::mutex> lock(mu_);
  options_.metrics->Observe(membership_.View());
}

void CoordinatorService::FillView(const MembershipView& view, v1::ClusterView* out) {
  out->set_epoch(view.epoch);
  out->set_incarnation(membership_.incarnation());
  for (uint64_t id : view.worker_ids) out->add_worker_ids(id);
  auto* map = out->mutable_shard_map();
  map->set_total_elements(view.total_elements);
  map->set_block_size(view.block_size);
  for (const auto& s : view.shards) {
    auto* info = map->add_shards();
    info->set_shard_id(s.shard_id);
    info->set_offset(s.range.offset);
    info->set_length(s.range.length);
    info->set_address(s.address);
  }
  out->set_ready(view.ready);
}

grpc::Status CoordinatorService::RegisterServer(grpc::ServerContext* ctx,
                                                const v1::RegisterServerRequest* req,
                                                v1::RegisterServerResponse* resp) {
  const CallerIdentity caller = Caller(ctx);
  std::lock_guard<std::mutex> lock(mu_);
  if (Status allowed = AuthorizeShardCall(caller, req->shard_id(), "RegisterServer");
      !allowed.ok()) {
    return Reject("register_server", allowed);
  }
  ServerReport report;
  report.total_elements = req->total_elements();
  report.range = ShardRange{req->offset(), req->length()};
  report.version = req->version();
  report.has_participants = req->has_participants();
  report.participants_step = req->participants_step();
  if (static_cast<size_t>(req->participants_size()) > Membership::kMaxMembers) {
    return Reject("register_server",
                  InvalidArgument("the report lists " + std::to_string(req->participants_size()) +
                                  " participants, more than a cluster may have"));
  }
  report.participants.assign(req->participants().begin(), req->participants().end());
  auto r = membership_.RegisterServer(req->shard_id(), req->address(), caller.server_identity,
                                      report);
  if (!r.ok()) return Reject("register_server", r.status());
  resp->set_num_shards(*r);
  resp->set_incarnation(membership_.incarnation());
  // The shards check the worker ids of their calls with it. Only where roles
  // are separated: otherwise every caller holds the server role, and the
  // key would be anybody's.
  if (tickets_ && roles_ && roles_->separated()) resp->set_ticket_key(tickets_->secret());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Join(grpc::ServerContext* ctx, const v1::JoinRequest* req,
                                      v1::JoinResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Status allowed = CheckRole(ctx, CallerRole::kWorker, "Join"); !allowed.ok()) {
    return Reject("join", allowed);
  }
  if (!join_rate_.TryAcquire()) {
    return Reject("join", ResourceExhausted(
                              "joins arrive faster than --max-joins-per-second (" +
                              FormatDouble(options_.max_joins_per_second) +
                              ") allows; retry later"));
  }
  auto r = membership_.Join(req->name(), req->total_elements());
  if (!r.ok()) {
    join_rate_.Refund();
    return Reject("join", r.status());
  }
  if (tickets_) resp->set_ticket(tickets_->Issue(r->worker_id));
  if (options_.metrics) options_.metrics->OnJoin();
  resp->set_worker_id(r->worker_id);
  resp->set_rank(r->rank);
  resp->set_world_size(r->world_size);
  resp->set_heartbeat_interval_ms(static_cast<uint32_t>(options_.heartbeat_interval.count()));
  FillView(membership_.View(), resp->mutable_view());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Leave(grpc::ServerContext* ctx, const v1::LeaveRequest* req,
                                       v1::LeaveResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Status allowed = CheckRole(ctx, CallerRole::kWorker, "Leave"); !allowed.ok()) {
    return Reject("leave", allowed);
  }
  if (Status own = CheckTicket(req->worker_id(), req->ticket(), "Leave"); !own.ok()) {
    return Reject("leave", own);
  }
  auto r = membership_.Leave(req->worker_id());
  if (!r.ok()) return Reject("leave", r.status());
  if (options_.metrics) options_.metrics->OnLeave();
  resp->set_epoch(*r);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                           v1::HeartbeatResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  // On every answer, NOT_FOUND included (rpc/incarnation_trailer.h); no
  // context when the handler is called directly.
  if (ctx != nullptr) SetIncarnationTrailer(ctx, membership_.incarnation());
  if (Status allowed = CheckRole(ctx, CallerRole::kWorker, "Heartbeat"); !allowed.ok()) {
    return Reject("heartbeat", allowed);
  }
  if (Status own = CheckTicket(req->worker_id(), req->ticket(), "Heartbeat"); !own.ok()) {
    return Reject("heartbeat", own);
  }
  auto r = membership_.Heartbeat(req->worker_id(), req->step());
  if (!r.ok()) return Reject("heartbeat", r.status());
  resp->set_epoch(r->epoch);
  resp->set_rank(r->rank);
  resp->set_world_size(r->world_size);
  resp->set_incarnation(membership_.incarnation());
  resp->set_recovering(r->provisional);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::GetClusterView(grpc::ServerContext*,
                                                const v1::GetClusterViewRequest*,
                                                v1::ClusterView* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  FillView(membership_.View(), resp);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::GetStepParticipants(grpc::ServerContext* ctx,
                                                     const v1::StepParticipantsRequest* req,
                                                     v1::StepParticipantsResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Status allowed = AuthorizeShardCall(Caller(ctx), req->shard_id(), "GetStepParticipants");
      !allowed.ok()) {
    return Reject("get_step_participants", allowed);
  }
  auto r = membership_.Participants(req->step(), req->shard_id(), req->pushes_received());
  if (!r.ok()) return Reject("get_step_participants", r.status());
  resp->set_step(r->step);
  for (uint64_t id : r->participants) resp->add_participants(id);
  for (uint64_t id : r->live) resp->add_live(id);
  resp->set_epoch(r->epoch);
  resp->set_incarnation(membership_.incarnation());
  return grpc::Status::OK;
}

bool CoordinatorService::recovering() {
  std::lock_guard<std::mutex> lock(mu_);
  return membership_.recovering();
}

}  // namespace loco

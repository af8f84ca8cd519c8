#include "server/coordinator/coordinator_service.h"

#include "rpc/rpc_status.h"

namespace loco {

CoordinatorService::CoordinatorService(const CoordinatorOptions& options, Membership::Clock clock)
    : options_(options), membership_(options.membership, std::move(clock)) {}

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

grpc::Status CoordinatorService::RegisterServer(grpc::ServerContext*,
                                                const v1::RegisterServerRequest* req,
                                                v1::RegisterServerResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = membership_.RegisterServer(req->shard_id(), req->address());
  if (!r.ok()) return Reject("register_server", r.status());
  resp->set_num_shards(*r);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Join(grpc::ServerContext*, const v1::JoinRequest* req,
                                      v1::JoinResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = membership_.Join(req->name(), req->total_elements());
  if (!r.ok()) return Reject("join", r.status());
  if (options_.metrics) options_.metrics->OnJoin();
  resp->set_worker_id(r->worker_id);
  resp->set_rank(r->rank);
  resp->set_world_size(r->world_size);
  resp->set_heartbeat_interval_ms(static_cast<uint32_t>(options_.heartbeat_interval.count()));
  FillView(membership_.View(), resp->mutable_view());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Leave(grpc::ServerContext*, const v1::LeaveRequest* req,
                                       v1::LeaveResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = membership_.Leave(req->worker_id());
  if (!r.ok()) return Reject("leave", r.status());
  if (options_.metrics) options_.metrics->OnLeave();
  resp->set_epoch(*r);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* req,
                                           v1::HeartbeatResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = membership_.Heartbeat(req->worker_id(), req->step());
  if (!r.ok()) return Reject("heartbeat", r.status());
  resp->set_epoch(r->epoch);
  resp->set_rank(r->rank);
  resp->set_world_size(r->world_size);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::GetClusterView(grpc::ServerContext*,
                                                const v1::GetClusterViewRequest*,
                                                v1::ClusterView* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  FillView(membership_.View(), resp);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::GetStepParticipants(grpc::ServerContext*,
                                                     const v1::StepParticipantsRequest* req,
                                                     v1::StepParticipantsResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = membership_.Participants(req->step(), req->shard_id(), req->pushes_received());
  if (!r.ok()) return Reject("get_step_participants", r.status());
  resp->set_step(r->step);
  for (uint64_t id : r->participants) resp->add_participants(id);
  for (uint64_t id : r->live) resp->add_live(id);
  resp->set_epoch(r->epoch);
  return grpc::Status::OK;
}

}  // namespace loco

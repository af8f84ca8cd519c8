// WorkerImpl: connecting, joining, leaving. The step is in
// client/worker_step.cc, the per-shard RPCs in client/worker_shard_rpcs.cc;
// the contract is in client/worker.h.
#include "client/worker_impl.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "client/cluster_progress.h"
#include "client/device_gradient_encoder.h"
#include "client/gradient_encoder.h"
#include "client/shard_map_check.h"
#include "common/log.h"
#include "rpc/reconnect_backoff.h"
#include "rpc/rpc_status.h"
#include "rpc/transport_failure.h"

namespace loco {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Heartbeat interval when the coordinator does not name one.
constexpr uint32_t kDefaultHeartbeatMs = 1000;

RetryOptions RetryOptionsFrom(const WorkerOptions& o) {
  return RetryOptions{o.max_retries, o.initial_backoff_ms, o.max_backoff_ms, o.retry_budget_ms};
}

// The check a RetryPolicy asks about such a connection: is it this
// process's transport that the peer refuses?
RetryPolicy::ClosedAtConnectCheck RefusalCheck(std::shared_ptr<const TransportSecurity> security) {
  return [security = std::move(security)](std::string_view message) {
    return security->RefusalOfThisTransport(message);
  };
}

// The encoder of one shard's range, in the memory the gradients live in.
StatusOr<std::unique_ptr<ShardEncoder>> MakeShardEncoder(const WorkerOptions& options,
                                                         uint64_t worker_id, uint64_t offset,
                                                         uint64_t length) {
  if (options.gradient_device >= 0) {
    auto made = DeviceGradientEncoder::Create(options, worker_id, offset,
                                              static_cast<size_t>(length),
                                              options.gradient_device);
    if (!made.ok()) return made.status();
    return std::unique_ptr<ShardEncoder>(std::move(made).value());
  }
  return std::unique_ptr<ShardEncoder>(
      std::make_unique<GradientEncoder>(options, worker_id, offset, static_cast<size_t>(length)));
}

}  // namespace

StatusOr<std::unique_ptr<Worker>> Worker::Connect(const WorkerOptions& options) {
  LOCO_RETURN_IF_ERROR(ValidateWorkerOptions(options));
  auto security = TransportSecurity::Load(options.security, TransportRole::kClient);
  if (!security.ok()) return security.status().Annotate("WorkerOptions.security");
  return std::unique_ptr<Worker>(
      std::make_unique<WorkerImpl>(options, std::move(security).value()));
}

WorkerImpl::WorkerImpl(const WorkerOptions& options,
                       std::shared_ptr<const TransportSecurity> security)
    : options_(options),
      security_(std::move(security)),
      retry_(RetryOptionsFrom(options), std::random_device{}()),
      registry_(options.metrics_registry ? options.metrics_registry
                                         : std::make_shared<prometheus::Registry>()),
      metrics_(std::make_unique<WorkerMetrics>(*registry_)) {
  retry_.SetClosedAtConnectCheck(RefusalCheck(security_));
  coordinator_channel_ = MakeChannel(options_.coordinator);
  coordinator_ = v1::Coordinator::NewStub(coordinator_channel_);
}

WorkerImpl::~WorkerImpl() {
  Status s = SendLeave(/*retry=*/false);
  if (!s.ok()) LOG_WARN("leaving on destruction: " << s.ToString());
}

std::shared_ptr<grpc::Channel> WorkerImpl::MakeChannel(const std::string& address) const {
  grpc::ChannelArguments args;
  const int limit = static_cast<int>(options_.max_message_bytes);
  args.SetMaxReceiveMessageSize(limit);
  args.SetMaxSendMessageSize(limit);
  // Reconnect soon after a server or the coordinator restarts.
  SetReconnectBackoff(&args, options_.max_backoff_ms);
  // TLS (or plaintext when asked for), the server-name override and the
  // bearer token, as the options say.
  std::shared_ptr<grpc::Channel> channel = security_->CreateChannel(address, args);
  if (channel) poller_.Watch(channel);
  return channel;
}

std::chrono::system_clock::time_point WorkerImpl::RpcDeadline() const {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(options_.rpc_timeout_ms);
}

SteadyClock::time_point WorkerImpl::TurnWaitLimit() const {
  return SteadyClock::now() + std::chrono::milliseconds(options_.rpc_timeout_ms);
}

std::vector<std::pair<uint64_t, uint64_t>> WorkerImpl::shard_ranges() const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const Shard& s : shards_) out.emplace_back(s.offset, s.length);
  return out;
}

TrafficStats WorkerImpl::traffic() const {
  std::lock_guard<std::mutex> l(stats_mu_);
  return traffic_;
}

// ---------------------------------------------------------------- join

StatusOr<v1::ClusterView> WorkerImpl::WaitForReadyView(v1::ClusterView view) {
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(options_.join_timeout_ms);
  int poll_ms = 20;
  const auto interrupted = [&] {
    return Aborted(
        "interrupted while waiting for the cluster to be ready (every parameter "
        "server registered with the coordinator)");
  };
  while (!view.ready()) {
    if (SteadyClock::now() >= deadline) {
      return DeadlineExceeded("the cluster view was not ready within join_timeout_ms = " +
                              std::to_string(options_.join_timeout_ms) +
                              " (are all parameter servers registered with the coordinator?)");
    }
    // Returns at once when InterruptJoin was called, before or during it.
    RetryPolicy::Pause(std::chrono::milliseconds(poll_ms), &join_interrupted_);
    poll_ms = std::min(poll_ms * 2, 500);
    if (join_interrupted_) return interrupted();
    v1::GetClusterViewRequest req;
    v1::ClusterView next;
    grpc::Status s = retry_.Run(
        "GetClusterView",
        [&] {
          grpc::ClientContext ctx;
          ctx.set_deadline(RpcDeadline());
          return coordinator_->GetClusterView(&ctx, req, &next);
        },
        /*pacer=*/nullptr, &join_interrupted_);
    if (join_interrupted_) return interrupted();
    if (!s.ok()) return FromGrpcStatus(s).Annotate("GetClusterView");
    view = std::move(next);
  }
  return view;
}

StatusOr<uint64_t> WorkerImpl::WaitForClusterStep(uint64_t step,
                                                  SteadyClock::time_point deadline,
                                                  std::chrono::milliseconds poll) {
  ClusterProgress progress(
      coordinator_.get(), [this](const std::string& address) { return MakeChannel(address); },
      &retry_, std::chrono::milliseconds(options_.rpc_timeout_ms));
  return progress.WaitFor(step, deadline, poll, interrupt_check_);
}

Status WorkerImpl::Join(size_t num_elements) {
  if (joined_) return FailedPrecondition("Join: this worker has already joined");
  if (num_elements == 0) return InvalidArgument("Join: the model must have at least 1 element");
  join_interrupted_ = false;
  v1::JoinResponse resp;
  LOCO_RETURN_IF_ERROR(RequestJoin(num_elements, &resp));
  joined_ = true;  // from here on, failures leave the cluster again

  StatusOr<v1::ClusterView> view = WaitForReadyView(resp.view());
  if (!view.ok()) return AbandonJoin(view.status().Annotate("Join"));
  Status valid = CheckShardMap(view->shard_map(), num_elements, options_);
  if (!valid.ok()) return AbandonJoin(valid.Annotate("Join"));
  num_elements_ = num_elements;
  Status opened = OpenShards(view->shard_map());
  if (!opened.ok()) return AbandonJoin(opened.Annotate("Join"));

  StartHeartbeat(resp.heartbeat_interval_ms() > 0 ? resp.heartbeat_interval_ms()
                                                  : kDefaultHeartbeatMs);
  LOG_INFO("joined as worker " << worker_id_.load() << " (rank " << rank_.load() << " of "
                               << world_size_.load() << "), " << shards_.size()
                               << " shard(s), " << num_elements << " parameters, codec "
                               << PushCodecName(options_.codec));
  return Status::Ok();
}

Status WorkerImpl::RequestJoin(size_t num_elements, v1::JoinResponse* resp) {
  v1::JoinRequest req;
  req.set_name(options_.name);
  req.set_total_elements(num_elements);
  // Bounded by the coordinator's outage budget, not the per-call retries:
  // a coordinator being restarted refuses connections for a while.
  RetryPolicy outage(RetryOptions{/*max_retries=*/-1, options_.initial_backoff_ms,
                                  options_.max_backoff_ms, options_.coordinator_outage_ms},
                     std::random_device{}());
  outage.SetClosedAtConnectCheck(RefusalCheck(security_));
  grpc::Status gs = outage.Run(
      "Join at " + options_.coordinator,
      [&] {
        grpc::ClientContext ctx;
        ctx.set_deadline(RpcDeadline());
        return coordinator_->Join(&ctx, req, resp);
      },
      /*pacer=*/nullptr, &join_interrupted_);
  if (join_interrupted_ && gs.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return Aborted("Join at " + options_.coordinator + ": interrupted while retrying (" +
                   gs.error_message() + ")");
  }
  if (gs.error_code() == grpc::StatusCode::UNAVAILABLE) {
    // RetryPolicy appended the hint for a cause it knows; otherwise the
    // address is the first thing to check.
    const bool hinted = ClassifyUnavailable(gs.error_message()) != TransportFailure::kOther;
    return FromGrpcStatus(gs).Annotate("Join at " + options_.coordinator +
                                       " (unreachable for coordinator_outage_ms = " +
                                       std::to_string(options_.coordinator_outage_ms) +
                                       (hinted ? ")" : "; is the address right?)"));
  }
  if (!gs.ok()) return FromGrpcStatus(gs).Annotate("Join at " + options_.coordinator);
  {
    std::lock_guard<std::mutex> lock(ticket_mu_);
    ticket_ = resp->ticket();
  }
  worker_id_ = resp->worker_id();  // after the ticket: LeaveNow reads both from any thread
  rank_ = resp->rank();
  world_size_ = resp->world_size();
  return Status::Ok();
}

Status WorkerImpl::AbandonJoin(Status why) {
  Status l = SendLeave(/*retry=*/false);
  if (!l.ok()) LOG_WARN("leaving after a failed join: " << l.ToString());
  shards_.clear();
  num_elements_ = 0;
  worker_id_ = 0;
  rank_ = 0;
  world_size_ = 0;
  joined_ = false;
  left_ = false;
  return why;
}

Status WorkerImpl::OpenShards(const v1::ShardMap& map) {
  std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>> channels;
  for (const v1::ShardInfo& info : map.shards()) {
    Shard s;
    s.id = info.shard_id();
    s.offset = info.offset();
    s.length = info.length();
    s.address = info.address();
    std::shared_ptr<grpc::Channel> ch;
    for (const auto& [addr, c] : channels) {
      if (addr == s.address) ch = c;
    }
    if (!ch) {
      ch = MakeChannel(s.address);
      channels.emplace_back(s.address, ch);
    }
    s.channel = ch;
    s.stub = v1::ParameterServer::NewStub(ch);
    s.puller = std::make_unique<PullBytesClient>(ch);
    auto encoder = MakeShardEncoder(options_, worker_id_.load(), s.offset, s.length);
    if (!encoder.ok()) return encoder.status().Annotate("shard " + std::to_string(s.id));
    s.encoder = std::move(encoder).value();
    shards_.push_back(std::move(s));
  }
  uint64_t state_bytes = 0;
  for (const Shard& s : shards_) state_bytes += s.encoder->state_bytes();
  metrics_->OnErrorStateBytes(state_bytes);
  // The groups were checked against this model size when set; a new map
  // (Rejoin) may cut them differently.
  return FillShardsHyper(hyper_groups_);
}

Status WorkerImpl::SetStepHyper(std::span<const HyperGroup> groups) {
  if (!joined_) {
    return FailedPrecondition("SetStepHyper: join first; the groups must cover the model "
                              "size given to Join");
  }
  if (!groups.empty()) {
    LOCO_RETURN_IF_ERROR(ValidateHyperGroups(groups, num_elements_).Annotate("SetStepHyper"));
  }
  LOCO_RETURN_IF_ERROR(FillShardsHyper(groups).Annotate("SetStepHyper"));
  hyper_groups_.assign(groups.begin(), groups.end());
  return Status::Ok();
}

Status WorkerImpl::FillShardsHyper(std::span<const HyperGroup> groups) {
  std::vector<v1::StepHyper> filled(shards_.size());
  if (!groups.empty()) {
    for (size_t i = 0; i < shards_.size(); ++i) {
      LOCO_RETURN_IF_ERROR(
          FillShardHyper(groups, shards_[i].offset, shards_[i].length, &filled[i]));
    }
  }
  for (size_t i = 0; i < shards_.size(); ++i) shards_[i].hyper = std::move(filled[i]);
  return Status::Ok();
}

void WorkerImpl::StartHeartbeat(uint32_t interval_ms) {
  HeartbeatCallbacks cb;
  cb.current_step = [this] { return step_.load(); };
  cb.on_update = [this](const v1::HeartbeatResponse& r) {
    // A recovering coordinator counts only the workers resumed so far; the
    // rank this worker had is still the cluster's (same ids, same order).
    if (r.recovering() && world_size_.load() > 0) return;
    rank_ = r.rank();
    world_size_ = r.world_size();
  };
  cb.on_expired = [this] { expired_ = true; };
  cb.has_left = [this] { return left_now_.load(); };
  heartbeat_ = std::make_unique<HeartbeatLoop>(coordinator_.get(), worker_id_.load(), ticket(),
                                               static_cast<int>(interval_ms),
                                               options_.rpc_timeout_ms, std::move(cb));
  heartbeat_->Start();
}

// ---------------------------------------------------------------- leave

Status WorkerImpl::SendLeave(bool retry) {
  if (!joined_ || left_) return Status::Ok();
  left_ = true;
  if (heartbeat_) heartbeat_->Stop();
  if (left_now_told_.load()) return Status::Ok();  // LeaveNow's Leave was answered
  v1::LeaveRequest req;
  req.set_worker_id(worker_id_.load());
  req.set_ticket(ticket());
  v1::LeaveResponse resp;
  auto attempt = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(RpcDeadline());
    return coordinator_->Leave(&ctx, req, &resp);
  };
  grpc::Status s = retry ? retry_.Run("Leave", attempt) : attempt();
  if (s.ok() || s.error_code() == grpc::StatusCode::NOT_FOUND) {
    LOG_INFO("worker " << worker_id_.load() << " left the cluster at step " << step_.load());
    return Status::Ok();
  }
  return FromGrpcStatus(s).Annotate("Leave");
}

Status WorkerImpl::Leave() { return SendLeave(/*retry=*/true); }

Status WorkerImpl::LeaveNow() {
  const uint64_t id = worker_id_.load();
  if (id == 0 || left_now_.exchange(true)) return Status::Ok();
  v1::LeaveRequest req;
  req.set_worker_id(id);
  req.set_ticket(ticket());
  v1::LeaveResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(RpcDeadline());
  grpc::Status s = coordinator_->Leave(&ctx, req, &resp);
  if (s.ok() || s.error_code() == grpc::StatusCode::NOT_FOUND) {
    left_now_told_ = true;
    LOG_INFO("worker " << id << " left the cluster at step " << step_.load()
                       << " (the step in progress no longer waits for it)");
    return Status::Ok();
  }
  return FromGrpcStatus(s).Annotate("Leave");
}

}  // namespace loco

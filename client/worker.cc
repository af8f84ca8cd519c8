// Worker: connecting, joining, the step and resynchronisation, leaving. The
// per-shard RPCs (push, pull, applying answers) are in
// client/worker_shard_rpcs.cc; the class contract is in client/worker.h.
#include "client/worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <thread>

#include "common/log.h"
#include "kernels/quantize.h"
#include "rpc/rpc_status.h"
#include "client/cluster_progress.h"
#include "client/device_gradient_encoder.h"
#include "client/gradient_encoder.h"

namespace loco {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Rounds of full-copy pulls one resynchronisation may take before giving up.
constexpr int kMaxResyncRounds = 8;
// Heartbeat interval when the coordinator does not name one.
constexpr int kDefaultHeartbeatMs = 1000;
// How long a worker other than rank 0 waits for the initial parameters
// before it offers its own (Worker::InitParameters).
constexpr std::chrono::milliseconds kInitOfferWait{5000};

RetryOptions RetryOptionsFrom(const WorkerOptions& o) {
  return RetryOptions{o.max_retries, o.initial_backoff_ms, o.max_backoff_ms, o.retry_budget_ms};
}

// Runs fn(0..n-1) concurrently: one thread per index beyond the first, which
// runs on the caller's thread. Returns when all are done.
void RunConcurrently(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(n > 0 ? n - 1 : 0);
  for (size_t i = 1; i < n; ++i) threads.emplace_back(fn, i);
  if (n > 0) fn(0);
  for (auto& t : threads) t.join();
}

// The first non-OK status in `v`, or OK.
Status FirstError(const std::vector<Status>& v) {
  for (const auto& s : v) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Worker>> Worker::Connect(const WorkerOptions& options) {
  LOCO_RETURN_IF_ERROR(ValidateWorkerOptions(options));
  auto security = TransportSecurity::Load(options.security, TransportRole::kClient);
  if (!security.ok()) return security.status().Annotate("WorkerOptions.security");
  return std::unique_ptr<Worker>(new Worker(options, std::move(security).value()));
}

Worker::Worker(const WorkerOptions& options, std::shared_ptr<const TransportSecurity> security)
    : options_(options),
      security_(std::move(security)),
      retry_(RetryOptionsFrom(options), std::random_device{}()),
      registry_(options.metrics_registry ? options.metrics_registry
                                         : std::make_shared<prometheus::Registry>()),
      metrics_(std::make_unique<WorkerMetrics>(*registry_)) {
  coordinator_channel_ = MakeChannel(options_.coordinator);
  coordinator_ = v1::Coordinator::NewStub(coordinator_channel_);
}

Worker::~Worker() {
  Status s = SendLeave(/*retry=*/false);
  if (!s.ok()) LOG_WARN("leaving on destruction: " << s.ToString());
}

std::shared_ptr<grpc::Channel> Worker::MakeChannel(const std::string& address) const {
  grpc::ChannelArguments args;
  const int limit = static_cast<int>(options_.max_message_bytes);
  args.SetMaxReceiveMessageSize(limit);
  args.SetMaxSendMessageSize(limit);
  // Reconnect soon after a server restarts (gRPC's default first backoff is
  // 1 s, growing to 120 s); our own retries bound the total wait.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, std::max(100, options_.max_backoff_ms));
  // TLS (or plaintext when asked for), the server-name override and the
  // bearer token, as the options say.
  return security_->CreateChannel(address, args);
}

std::chrono::system_clock::time_point Worker::RpcDeadline() const {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(options_.rpc_timeout_ms);
}

TrafficStats Worker::traffic() const {
  std::lock_guard<std::mutex> l(stats_mu_);
  return traffic_;
}

// ---------------------------------------------------------------- join

Status Worker::ValidateShardMap(const v1::ShardMap& map, size_t num_elements) const {
  if (map.total_elements() != num_elements) {
    return FailedPrecondition("the cluster's model has " + std::to_string(map.total_elements()) +
                              " elements but this worker's has " +
                              std::to_string(num_elements) +
                              "; every worker must train the same model");
  }
  if (map.shards_size() == 0) return DataLoss("the coordinator's shard map has no shards");
  const bool block_codec = IsBlockCodec(options_.codec);
  const uint32_t block = static_cast<uint32_t>(options_.block_size);
  if (block_codec && (map.block_size() == 0 || map.block_size() % block != 0)) {
    return InvalidArgument("this worker's block_size " + std::to_string(block) +
                           " does not divide the shard map's alignment " +
                           std::to_string(map.block_size()) +
                           " (blocks would straddle shard boundaries); use a block size that "
                           "divides it");
  }
  uint64_t expect = 0;
  for (int i = 0; i < map.shards_size(); ++i) {
    const v1::ShardInfo& s = map.shards(i);
    if (s.shard_id() != static_cast<uint32_t>(i) || s.offset() != expect || s.length() == 0 ||
        s.address().empty()) {
      return DataLoss("shard map entry " + std::to_string(i) + " (id " +
                      std::to_string(s.shard_id()) + ", offset " + std::to_string(s.offset()) +
                      ", length " + std::to_string(s.length()) + ", address '" + s.address() +
                      "') is not the next contiguous, non-empty shard starting at " +
                      std::to_string(expect));
    }
    if (block_codec && s.offset() % static_cast<uint64_t>(options_.block_size) != 0) {
      return InvalidArgument(
          "shard " + std::to_string(i) + " starts at " + std::to_string(s.offset()) +
          ", not a multiple of this worker's block_size " + std::to_string(options_.block_size) +
          " (the shard map aligns to " + std::to_string(map.block_size()) +
          "); use a block size that divides it");
    }
    // Payload fields and framing add a few bytes to the raw fp32 copy.
    if (s.length() * 4 + 4096 > options_.max_message_bytes) {
      return InvalidArgument("shard " + std::to_string(i) + " holds " +
                             std::to_string(s.length()) + " elements; a full fp32 copy does not "
                             "fit in max_message_bytes = " +
                             std::to_string(options_.max_message_bytes) + "; raise it");
    }
    expect += s.length();
  }
  if (expect != num_elements) {
    return DataLoss("the shard map covers " + std::to_string(expect) + " of " +
                    std::to_string(num_elements) + " elements");
  }
  return Status::Ok();
}

StatusOr<v1::ClusterView> Worker::WaitForReadyView(v1::ClusterView view) {
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(options_.join_timeout_ms);
  int poll_ms = 20;
  while (!view.ready()) {
    if (SteadyClock::now() >= deadline) {
      return DeadlineExceeded("the cluster view was not ready within join_timeout_ms = " +
                              std::to_string(options_.join_timeout_ms) +
                              " (are all parameter servers registered with the coordinator?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
    poll_ms = std::min(poll_ms * 2, 500);
    v1::GetClusterViewRequest req;
    v1::ClusterView next;
    grpc::Status s = retry_.Run("GetClusterView", [&] {
      grpc::ClientContext ctx;
      ctx.set_deadline(RpcDeadline());
      return coordinator_->GetClusterView(&ctx, req, &next);
    });
    if (!s.ok()) return FromGrpcStatus(s).Annotate("GetClusterView");
    view = std::move(next);
  }
  return view;
}

StatusOr<uint64_t> Worker::WaitForClusterStep(uint64_t step, SteadyClock::time_point deadline,
                                              std::chrono::milliseconds poll) {
  ClusterProgress progress(
      coordinator_.get(), [this](const std::string& address) { return MakeChannel(address); },
      &retry_, std::chrono::milliseconds(options_.rpc_timeout_ms));
  return progress.WaitFor(step, deadline, poll);
}

Status Worker::Join(size_t num_elements) {
  if (joined_) return FailedPrecondition("Join: this worker has already joined");
  if (num_elements == 0) return InvalidArgument("Join: the model must have at least 1 element");
  v1::JoinRequest req;
  req.set_name(options_.name);
  req.set_total_elements(num_elements);
  v1::JoinResponse resp;
  grpc::Status gs = retry_.Run("Join", [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(RpcDeadline());
    return coordinator_->Join(&ctx, req, &resp);
  });
  if (!gs.ok()) return FromGrpcStatus(gs).Annotate("Join at " + options_.coordinator);
  worker_id_ = resp.worker_id();
  rank_ = resp.rank();
  world_size_ = resp.world_size();
  joined_ = true;  // from here on, failures leave the cluster again

  // A failed join leaves the cluster again and forgets it, so that this
  // Worker can Join again (for example once the servers are up).
  auto fail = [this](Status s) {
    Status l = SendLeave(/*retry=*/false);
    if (!l.ok()) LOG_WARN("leaving after a failed join: " << l.ToString());
    shards_.clear();
    num_elements_ = 0;
    worker_id_ = 0;
    rank_ = 0;
    world_size_ = 0;
    joined_ = false;
    left_ = false;
    return s;
  };
  StatusOr<v1::ClusterView> view = WaitForReadyView(resp.view());
  if (!view.ok()) return fail(view.status().Annotate("Join"));
  Status valid = ValidateShardMap(view->shard_map(), num_elements);
  if (!valid.ok()) return fail(valid.Annotate("Join"));

  num_elements_ = num_elements;
  std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>> channels;
  for (const v1::ShardInfo& info : view->shard_map().shards()) {
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
    if (options_.gradient_device >= 0) {
      auto made = DeviceGradientEncoder::Create(options_, worker_id_.load(), s.offset,
                                                static_cast<size_t>(s.length),
                                                options_.gradient_device);
      if (!made.ok()) return fail(made.status().Annotate("Join: shard " + std::to_string(s.id)));
      s.encoder = std::move(made).value();
    } else {
      s.encoder = std::make_unique<GradientEncoder>(options_, worker_id_.load(), s.offset,
                                                    static_cast<size_t>(s.length));
    }
    shards_.push_back(std::move(s));
  }
  uint64_t state_bytes = 0;
  for (const Shard& s : shards_) state_bytes += s.encoder->state_bytes();
  metrics_->OnErrorStateBytes(state_bytes);

  const int interval =
      resp.heartbeat_interval_ms() > 0 ? static_cast<int>(resp.heartbeat_interval_ms())
                                       : kDefaultHeartbeatMs;
  HeartbeatCallbacks cb;
  cb.current_step = [this] { return step_.load(); };
  cb.on_update = [this](const v1::HeartbeatResponse& r) {
    rank_ = r.rank();
    world_size_ = r.world_size();
  };
  cb.on_expired = [this] { expired_ = true; };
  heartbeat_ = std::make_unique<HeartbeatLoop>(coordinator_.get(), worker_id_.load(), interval,
                                               options_.rpc_timeout_ms, std::move(cb));
  heartbeat_->Start();
  LOG_INFO("joined as worker " << worker_id_.load() << " (rank " << rank_.load() << " of "
                               << world_size_.load() << "), " << shards_.size()
                               << " shard(s), " << num_elements << " parameters, codec "
                               << PushCodecName(options_.codec));
  return Status::Ok();
}

// ---------------------------------------------------------------- init, step, resync

bool Worker::AllShardsInitialized(std::chrono::milliseconds max_wait) {
  const auto deadline = SteadyClock::now() + max_wait;
  auto poll = std::chrono::milliseconds(10);
  std::vector<bool> ready(shards_.size(), false);
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < shards_.size(); ++i) {
      if (ready[i]) continue;
      v1::ShardStatusRequest req;
      req.set_shard_id(shards_[i].id);
      v1::ShardStatusResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(RpcDeadline());
      ready[i] = shards_[i].stub->ShardStatus(&ctx, req, &resp).ok() && resp.initialized();
      all = all && ready[i];
    }
    if (all) return true;
    if (SteadyClock::now() + poll >= deadline) return false;
    std::this_thread::sleep_for(poll);
    poll = std::min(poll * 2, std::chrono::milliseconds(200));
  }
}

Status Worker::Resync(std::optional<uint64_t> refused_step, std::vector<float>* params,
                      PullOutcome* out) {
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(options_.step_timeout_ms);
  const size_t n = shards_.size();
  std::vector<uint64_t> min_version(n, 0);
  std::vector<bool> pull(n, true);
  for (int round = 0; round < kMaxResyncRounds; ++round) {
    std::vector<Status> st(n);
    std::vector<PullOutcome> outcomes(n);
    RunConcurrently(n, [&](size_t i) {
      if (pull[i]) {
        st[i] = PullShard(shards_[i], min_version[i], /*want_full=*/true, deadline, params,
                          &outcomes[i]);
      }
    });
    for (const auto& o : outcomes) {
      out->wire_bytes += o.wire_bytes;
      out->fp32_bytes += o.fp32_bytes;
    }
    LOCO_RETURN_IF_ERROR(FirstError(st));
    uint64_t lo = std::numeric_limits<uint64_t>::max(), hi = 0;
    for (const Shard& s : shards_) {
      lo = std::min(lo, s.version);
      hi = std::max(hi, s.version);
    }
    if (lo == hi && refused_step.has_value() && hi == *refused_step) {
      // Every shard is still at the step that refused our push: that open step
      // does not count us as a participant. We take part from the next one.
      LOG_INFO("resync: step " << hi << " excludes this worker; waiting for version " << hi + 1);
      refused_step.reset();
      std::fill(min_version.begin(), min_version.end(), hi + 1);
      std::fill(pull.begin(), pull.end(), true);
      continue;
    }
    if (lo == hi) {
      step_ = hi;
      return Status::Ok();
    }
    // Shards disagree (a step is completing on some of them): wait for the
    // laggards to reach the newest version.
    for (size_t i = 0; i < n; ++i) {
      pull[i] = shards_[i].version < hi;
      min_version[i] = hi;
    }
  }
  return Aborted("resync: the shards did not agree on a version after " +
                 std::to_string(kMaxResyncRounds) + " rounds of full pulls");
}

Status Worker::InitParameters(std::span<const float> initial, std::vector<float>* params) {
  if (!joined_) return FailedPrecondition("InitParameters: call Join first");
  if (expired_) return FailedPrecondition("InitParameters: this worker expired; join again");
  if (initial.size() != num_elements_) {
    return InvalidArgument("InitParameters: initial has " + std::to_string(initial.size()) +
                           " elements; the model joined with " + std::to_string(num_elements_));
  }
  for (size_t i = 0; i < initial.size(); ++i) {
    if (!std::isfinite(initial[i])) {
      return InvalidArgument("InitParameters: initial element " + std::to_string(i) +
                             " is not finite; initial parameters must be finite");
    }
  }
  // The first offer wins, so every worker may offer; but W full copies
  // arriving at once cost each server W shard-sized receive buffers, all but
  // one refused as ALREADY_EXISTS. Rank 0 offers at once; the others offer
  // only when the shards are still uninitialised after a bounded wait (rank
  // 0 slow, or gone).
  if (rank_.load() == 0 || !AllShardsInitialized(kInitOfferWait)) {
    std::vector<Status> st(shards_.size());
    RunConcurrently(shards_.size(), [&](size_t i) { st[i] = InitShard(shards_[i], initial); });
    LOCO_RETURN_IF_ERROR(FirstError(st));
  }
  params->assign(initial.begin(), initial.end());
  PullOutcome pulled;
  Status s = Resync(std::nullopt, params, &pulled);
  {
    std::lock_guard<std::mutex> l(stats_mu_);
    traffic_.pull_wire_bytes += pulled.wire_bytes;
    traffic_.pull_fp32_bytes += pulled.fp32_bytes;
  }
  LOCO_RETURN_IF_ERROR(s.Annotate("InitParameters"));
  initialized_ = true;
  metrics_->OnVersion(step_.load());
  LOG_INFO("parameters at version " << step_.load());
  return Status::Ok();
}

Status Worker::Rejoin(std::span<const float> initial, std::vector<float>* params) {
  if (!joined_ || !expired_) {
    return FailedPrecondition("Rejoin: only a worker that joined and then expired rejoins");
  }
  if (left_ || left_now_) return FailedPrecondition("Rejoin: this worker has left the cluster");
  const uint64_t old_id = worker_id_.load();
  if (heartbeat_) heartbeat_->Stop();
  heartbeat_.reset();
  shards_.clear();
  joined_ = false;
  initialized_ = false;
  expired_ = false;
  step_ = 0;
  LOCO_RETURN_IF_ERROR(Join(num_elements_).Annotate("Rejoin"));
  LOCO_RETURN_IF_ERROR(InitParameters(initial, params).Annotate("Rejoin"));
  LOG_INFO("worker " << old_id << " had expired; rejoined as worker " << worker_id_.load()
                     << " at step " << step_.load());
  return Status::Ok();
}

StatusOr<StepResult> Worker::Step(std::span<const float> grads, std::vector<float>* params) {
  // The gradient is final already: every shard may go at once.
  return Step([](const GradientReady& ready) {
    ready(0);
    return Status::Ok();
  }, grads, params);
}

StatusOr<StepResult> Worker::Step(const GradientCompute& compute, std::span<const float> grads,
                                  std::vector<float>* params) {
  if (!initialized_) return FailedPrecondition("Step: call Join and InitParameters first");
  if (left_) return FailedPrecondition("Step: this worker has left the cluster");
  if (expired_) {
    return FailedPrecondition("Step: worker " + std::to_string(worker_id_.load()) +
                              " expired (the coordinator missed its heartbeats); create a new "
                              "Worker and join again");
  }
  if (grads.size() != num_elements_ || params->size() != num_elements_) {
    return InvalidArgument("Step: grads has " + std::to_string(grads.size()) +
                           " and params " + std::to_string(params->size()) +
                           " elements; both must have the model's " +
                           std::to_string(num_elements_));
  }
  const auto step_started = SteadyClock::now();
  const uint64_t t = step_.load();
  const size_t n = shards_.size();
  StepResult result;
  result.step = t;
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(options_.step_timeout_ms);
  std::vector<Status> push_st(n), pull_st(n);
  std::vector<EncodeStats> enc(n);
  std::vector<PullOutcome> pulled(n);

  // How far the computation got. A shard is pushed as its range becomes
  // final and pulled at once; its answer is written into *params only after
  // the computation has returned (it still reads them).
  GradientProgress progress(num_elements_);
  UplinkTurns turns(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      UplinkTurn turn(options_.ordered_pushes ? &turns : nullptr, i);
      PushAndPull(shards_[i], grads, t, deadline, params, progress, turn, &enc[i], &pulled[i],
                  &push_st[i], &pull_st[i]);
    });
  }
  const Status computation = compute([&](size_t from) { progress.Ready(from); });
  const auto compute_ended = SteadyClock::now();
  progress.Done(computation.ok());
  for (auto& th : threads) th.join();
  if (!computation.ok()) {
    for (size_t i = 0; i < n; ++i) shards_[i].encoder->Discard();
    return computation;
  }
  for (size_t i = 0; i < n; ++i) {
    result.nonfinite += enc[i].nonfinite;
    // Not accepted: the compensation for it must not stay in the state.
    if (!push_st[i].ok()) shards_[i].encoder->Discard();
    if (push_st[i].ok()) {
      result.push_wire_bytes += shards_[i].encoder->WireBytes();
      result.push_fp32_bytes += 4 * shards_[i].length;
    }
    result.pull_wire_bytes += pulled[i].wire_bytes;
    result.pull_fp32_bytes += pulled[i].fp32_bytes;
  }
  if (result.nonfinite > 0) {
    LOG_WARN("step " << t << ": " << result.nonfinite
                     << " non-finite gradient element(s) were sent as 0");
  }

  bool refused = false;
  for (const Status& s : push_st) {
    if (s.code() == StatusCode::kFailedPrecondition) {
      refused = true;
      LOG_WARN("step " << t << ": " << s.message() << "; resynchronising");
    }
  }
  Status failure = Status::Ok();
  if (!refused) {
    failure = FirstError(push_st);
    if (failure.ok()) failure = FirstError(pull_st);
  }
  for (size_t i = 0; i < n; ++i) {
    if (push_st[i].ok()) result.error_sq_norm += enc[i].error_sq_norm;
  }

  bool agree = failure.ok() && !refused;
  for (const Shard& s : shards_) agree = agree && s.version == shards_[0].version;
  if (failure.ok() && !agree) {
    if (!refused) LOG_WARN("step " << t << ": shards disagree on the version; resynchronising");
    PullOutcome extra;
    failure = Resync(refused ? std::optional<uint64_t>(t) : std::nullopt, params, &extra);
    result.pull_wire_bytes += extra.wire_bytes;
    result.pull_fp32_bytes += extra.fp32_bytes;
    result.resynced = true;
  } else if (agree) {
    step_ = shards_[0].version;
  }
  {
    // Counted even when the step fails, so that traffic() matches the wire.
    std::lock_guard<std::mutex> l(stats_mu_);
    traffic_.push_wire_bytes += result.push_wire_bytes;
    traffic_.push_fp32_bytes += result.push_fp32_bytes;
    traffic_.pull_wire_bytes += result.pull_wire_bytes;
    traffic_.pull_fp32_bytes += result.pull_fp32_bytes;
    traffic_.nonfinite += result.nonfinite;
    traffic_.resyncs += result.resynced ? 1 : 0;
    traffic_.steps += failure.ok() ? 1 : 0;
  }
  if (!failure.ok()) return failure.Annotate("Step " + std::to_string(t));
  // Each shard's thread measured its range (a device gradient's, its
  // encoder: the host cannot read it); the shards cover the model.
  double grad_sq_norm = 0;
  for (const EncodeStats& e : enc) grad_sq_norm += e.grad_sq_norm.value_or(0.0);
  result.seconds = std::chrono::duration<double>(SteadyClock::now() - step_started).count();
  result.compute_seconds = std::chrono::duration<double>(compute_ended - step_started).count();
  metrics_->OnStep(grad_sq_norm, result, step_.load(), world_size_.load());
  return result;
}

// ---------------------------------------------------------------- leave

Status Worker::SendLeave(bool retry) {
  if (!joined_ || left_) return Status::Ok();
  left_ = true;
  if (heartbeat_) heartbeat_->Stop();
  v1::LeaveRequest req;
  req.set_worker_id(worker_id_.load());
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

Status Worker::Leave() { return SendLeave(/*retry=*/true); }

Status Worker::LeaveNow() {
  const uint64_t id = worker_id_.load();
  if (id == 0 || left_now_.exchange(true)) return Status::Ok();
  v1::LeaveRequest req;
  req.set_worker_id(id);
  v1::LeaveResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(RpcDeadline());
  grpc::Status s = coordinator_->Leave(&ctx, req, &resp);
  if (s.ok() || s.error_code() == grpc::StatusCode::NOT_FOUND) {
    LOG_INFO("worker " << id << " left the cluster at step " << step_.load()
                       << " (the step in progress no longer waits for it)");
    return Status::Ok();
  }
  return FromGrpcStatus(s).Annotate("Leave");
}

}  // namespace loco

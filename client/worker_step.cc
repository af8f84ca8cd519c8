// WorkerImpl: the initial parameters, the step and resynchronisation. The
// per-shard RPCs are in client/worker_shard_rpcs.cc; the contract is in
// client/worker.h.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

#include "client/worker_impl.h"
#include "common/log.h"

namespace loco {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Rounds of full-copy pulls one resynchronisation may take before giving up.
constexpr int kMaxResyncRounds = 8;
// How often the thread running Step looks at the interrupt check while it
// waits for the shards.
constexpr std::chrono::milliseconds kInterruptCheckPeriod{100};

}  // namespace

// Counts a step's shard threads that have finished, so that the thread
// running Step can wait for them in slices (to look at the interrupt check)
// rather than in join. Thread-safe.
class ShardsFinished {
 public:
  void One() {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    cv_.notify_all();
  }
  // True once `all` have finished; false after `wait`.
  bool WaitFor(size_t all, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, wait, [&] { return done_ >= all; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t done_ = 0;
};

namespace {

// The first non-OK status in `v`, or OK.
Status FirstError(const std::vector<Status>& v) {
  for (const auto& s : v) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

// InvalidArgument unless `size` is the model's.
Status CheckModelSize(const char* call, const char* what, size_t size, size_t model) {
  if (size == model) return Status::Ok();
  return InvalidArgument(std::string(call) + ": " + what + " has " + std::to_string(size) +
                         " elements; the model joined with " + std::to_string(model));
}

}  // namespace

// ---------------------------------------------------------------- initial parameters

bool WorkerImpl::AllShardsInitialized(std::chrono::milliseconds max_wait,
                                      const std::function<bool()>& stop_waiting) {
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
    if (stop_waiting() || SteadyClock::now() + poll >= deadline) return false;
    std::this_thread::sleep_for(poll);
    // At most kInterruptCheckPeriod when stop_waiting looks at the check.
    poll = std::min(poll * 2,
                    interrupt_check_ ? kInterruptCheckPeriod : std::chrono::milliseconds(200));
  }
}

Status WorkerImpl::OfferInitialParameters(std::span<const float> initial) {
  // The first offer wins, so every worker may offer; but W full copies
  // arriving at once cost each server W shard-sized receive buffers, all but
  // one refused as ALREADY_EXISTS (measured: a 73.6M model's server peaked
  // at 1.57 GB instead of 0.72 GB with W = 4, when the others offered after
  // a fixed 5 s while rank 0's copy was still on its way). Rank 0 offers at
  // once; the others wait for its copy, however long it takes, and offer
  // only once they have become rank 0 themselves (rank 0 left or expired:
  // the heartbeat renumbers the ranks) or after InitShardTimeout.
  // Both waits (for rank 0's copy, and the offer's retries of a server that
  // is away) end when the interrupt check says so.
  bool interrupted = false;
  const auto stop_waiting = [&] {
    interrupted = interrupt_check_ && interrupt_check_();
    return interrupted || rank_.load() == 0 || expired_.load();
  };
  if (rank_.load() != 0 && AllShardsInitialized(InitShardTimeout(options_), stop_waiting)) {
    return Status::Ok();
  }
  if (interrupted) {
    return Aborted(
        "InitParameters was interrupted (its interrupt check said so) while waiting "
        "for rank 0's initial parameters to reach every shard");
  }
  std::vector<Status> st(shards_.size());
  RunShardsWatchingInterrupt("InitParameters", [&](size_t i, StepAbort& abort) {
    st[i] = InitShard(shards_[i], initial, &abort);
  });
  return FirstError(st);
}

Status WorkerImpl::InitParameters(std::span<const float> initial, std::span<float> params) {
  if (!joined_) return FailedPrecondition("InitParameters: call Join first");
  if (expired_) return FailedPrecondition("InitParameters: this worker expired; join again");
  LOCO_RETURN_IF_ERROR(CheckModelSize("InitParameters", "initial", initial.size(), num_elements_));
  LOCO_RETURN_IF_ERROR(CheckModelSize("InitParameters", "params", params.size(), num_elements_));
  for (size_t i = 0; i < initial.size(); ++i) {
    if (!std::isfinite(initial[i])) {
      return InvalidArgument("InitParameters: initial element " + std::to_string(i) +
                             " is not finite; initial parameters must be finite");
    }
  }
  LOCO_RETURN_IF_ERROR(OfferInitialParameters(initial));
  if (params.data() != initial.data()) std::copy(initial.begin(), initial.end(), params.begin());
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

Status WorkerImpl::Rejoin(std::span<const float> initial, std::span<float> params) {
  if (!joined_ || !expired_) {
    return FailedPrecondition("Rejoin: only a worker that joined and then expired rejoins");
  }
  if (left_ || left_now_) return FailedPrecondition("Rejoin: this worker has left the cluster");
  // Refused before this worker gives up its place: the join would be wasted.
  LOCO_RETURN_IF_ERROR(CheckModelSize("Rejoin", "initial", initial.size(), num_elements_));
  LOCO_RETURN_IF_ERROR(CheckModelSize("Rejoin", "params", params.size(), num_elements_));
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

// ---------------------------------------------------------------- step

StatusOr<StepResult> WorkerImpl::Step(std::span<const float> grads, std::span<float> params) {
  // The gradient is final already: every shard may go at once.
  return Step([](const GradientReady& ready) {
    ready(0);
    return Status::Ok();
  }, grads, params);
}

StatusOr<StepResult> WorkerImpl::Step(const GradientCompute& compute,
                                      std::span<const float> grads, std::span<float> params) {
  LOCO_RETURN_IF_ERROR(CheckStepPreconditions(grads, params));
  const auto step_started = SteadyClock::now();
  const uint64_t t = step_.load();
  ShardOutcomes outcomes(shards_.size());
  SteadyClock::time_point compute_ended;
  const Status computation =
      PushAndPullAll(compute, grads, params, t, &outcomes, &compute_ended);
  if (!computation.ok()) {
    // The shards pushed before it failed crossed the wire (and were
    // committed); traffic() counts them, as the servers do.
    CountTraffic(TallyStep(t, outcomes), /*completed=*/false);
    for (Shard& shard : shards_) shard.encoder->Discard();
    return computation;
  }
  StepResult result = TallyStep(t, outcomes);
  const Status failure = SettleStep(t, outcomes, params, &result);
  // Counted even when the step fails, so that traffic() matches the wire.
  CountTraffic(result, failure.ok());
  if (!failure.ok()) return AskMembershipAfter(failure.Annotate("Step " + std::to_string(t)));
  // Each shard's thread measured its range (a device gradient's, its
  // encoder: the host cannot read it); the shards cover the model.
  double grad_sq_norm = 0;
  for (const EncodeStats& e : outcomes.encode) grad_sq_norm += e.grad_sq_norm.value_or(0.0);
  result.seconds = std::chrono::duration<double>(SteadyClock::now() - step_started).count();
  result.compute_seconds = std::chrono::duration<double>(compute_ended - step_started).count();
  metrics_->OnStep(grad_sq_norm, result, step_.load(), world_size_.load());
  return result;
}

Status WorkerImpl::AskMembershipAfter(Status failure) {
  // Failures that a stall explains: the process was stopped (SIGSTOP, a
  // long GC or swap) past the heartbeat timeout, and its own RPC deadline
  // ran out first. Refusals of what was sent (INVALID_ARGUMENT, ...) are
  // not about membership.
  const StatusCode code = failure.code();
  const bool maybe_stalled =
      code == StatusCode::kDeadlineExceeded || code == StatusCode::kUnavailable ||
      code == StatusCode::kFailedPrecondition || code == StatusCode::kNotFound ||
      code == StatusCode::kAborted;
  if (!maybe_stalled || expired_ || heartbeat_ == nullptr) return failure;
  const grpc::Status asked = heartbeat_->BeatOnce();
  if (!expired_) return failure;
  return FailedPrecondition("worker " + std::to_string(worker_id_.load()) +
                            " was expired by the coordinator (" + asked.error_message() +
                            ") while its step failed (" + failure.ToString() +
                            "); call Rejoin");
}

Status WorkerImpl::CheckStepPreconditions(std::span<const float> grads,
                                          std::span<float> params) const {
  if (!initialized_) return FailedPrecondition("Step: call Join and InitParameters first");
  if (left_) return FailedPrecondition("Step: this worker has left the cluster");
  if (expired_) {
    return FailedPrecondition("Step: worker " + std::to_string(worker_id_.load()) +
                              " expired (the coordinator missed its heartbeats); create a new "
                              "Worker and join again");
  }
  if (grads.size() != num_elements_ || params.size() != num_elements_) {
    return InvalidArgument("Step: grads has " + std::to_string(grads.size()) +
                           " and params " + std::to_string(params.size()) +
                           " elements; both must have the model's " +
                           std::to_string(num_elements_));
  }
  return Status::Ok();
}

Status WorkerImpl::PushAndPullAll(const GradientCompute& compute, std::span<const float> grads,
                                  std::span<float> params, uint64_t step,
                                  ShardOutcomes* outcomes,
                                  SteadyClock::time_point* compute_ended) {
  const size_t n = shards_.size();
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(options_.step_timeout_ms);
  // How far the computation got. A shard is pushed as its range becomes
  // final and pulled at once; its answer is written into params only after
  // the computation has returned (it still reads them).
  GradientProgress progress(num_elements_);
  UplinkTurns turns(n);
  Status computation;
  RunShardsWatchingInterrupt(
      "the step",
      [&](size_t i, StepAbort& abort) {
        UplinkTurn turn(options_.ordered_pushes ? &turns : nullptr, i);
        PushAndPull(shards_[i], grads, step, deadline, params, progress, turn, abort,
                    &outcomes->encode[i], &outcomes->pulled[i], &outcomes->push[i],
                    &outcomes->pull[i]);
      },
      [&] {
        computation = compute([&](size_t from) { progress.Ready(from); });
        *compute_ended = SteadyClock::now();
        progress.Done(computation.ok());
      });
  return computation;
}

void WorkerImpl::WaitForShards(const char* what, size_t n, ShardsFinished& finished,
                               StepAbort& abort) {
  if (!interrupt_check_) return;  // the joins wait
  while (!finished.WaitFor(n, kInterruptCheckPeriod)) {
    if (!step_interrupted_ && interrupt_check_()) {
      step_interrupted_ = true;
      abort.Abort(Aborted(std::string(what) + " was interrupted (its interrupt check said so)"));
    }
  }
}

void WorkerImpl::RunShardsWatchingInterrupt(const char* what,
                                            const std::function<void(size_t, StepAbort&)>& body,
                                            const std::function<void()>& meanwhile) {
  const size_t n = shards_.size();
  StepAbort abort;
  ShardsFinished finished;
  step_interrupted_ = false;
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      body(i, abort);
      finished.One();
    });
  }
  if (meanwhile) meanwhile();
  WaitForShards(what, n, finished, abort);
  for (auto& th : threads) th.join();
  // A resynchronisation's pulls, or a later Join's, must not see it.
  step_interrupted_ = false;
}

StepResult WorkerImpl::TallyStep(uint64_t step, const ShardOutcomes& outcomes) {
  StepResult result;
  result.step = step;
  for (size_t i = 0; i < shards_.size(); ++i) {
    Shard& shard = shards_[i];
    result.nonfinite += outcomes.encode[i].nonfinite;
    if (outcomes.push[i].ok()) {
      result.push_wire_bytes += shard.encoder->WireBytes();
      result.push_fp32_bytes += 4 * shard.length;
      result.error_sq_norm += outcomes.encode[i].error_sq_norm;
    } else {
      // Not accepted: the compensation for it must not stay in the state.
      shard.encoder->Discard();
    }
    result.pull_wire_bytes += outcomes.pulled[i].wire_bytes;
    result.pull_fp32_bytes += outcomes.pulled[i].fp32_bytes;
  }
  if (result.nonfinite > 0) {
    LOG_WARN("step " << step << ": " << result.nonfinite
                     << " non-finite gradient element(s) were sent as 0");
  }
  return result;
}

Status WorkerImpl::SettleStep(uint64_t step, const ShardOutcomes& outcomes,
                              std::span<float> params, StepResult* result) {
  bool refused = false;
  for (const Status& s : outcomes.push) {
    if (s.code() == StatusCode::kFailedPrecondition) {
      refused = true;
      LOG_WARN("step " << step << ": " << s.message() << "; resynchronising");
    }
  }
  if (!refused) {
    Status failure = FirstError(outcomes.push);
    if (failure.ok()) failure = FirstError(outcomes.pull);
    if (!failure.ok()) return failure;
  }
  bool agree = !refused;
  for (const Shard& s : shards_) agree = agree && s.version == shards_[0].version;
  if (agree) {
    step_ = shards_[0].version;
    return Status::Ok();
  }
  if (!refused) LOG_WARN("step " << step << ": shards disagree on the version; resynchronising");
  PullOutcome extra;
  const Status resynced =
      Resync(refused ? std::optional<uint64_t>(step) : std::nullopt, params, &extra);
  result->pull_wire_bytes += extra.wire_bytes;
  result->pull_fp32_bytes += extra.fp32_bytes;
  result->resynced = true;
  return resynced;
}

void WorkerImpl::CountTraffic(const StepResult& result, bool completed) {
  std::lock_guard<std::mutex> l(stats_mu_);
  traffic_.push_wire_bytes += result.push_wire_bytes;
  traffic_.push_fp32_bytes += result.push_fp32_bytes;
  traffic_.pull_wire_bytes += result.pull_wire_bytes;
  traffic_.pull_fp32_bytes += result.pull_fp32_bytes;
  traffic_.nonfinite += result.nonfinite;
  traffic_.resyncs += result.resynced ? 1 : 0;
  traffic_.steps += completed ? 1 : 0;
}

// ---------------------------------------------------------------- resync

Status WorkerImpl::Resync(std::optional<uint64_t> refused_step, std::span<float> params,
                          PullOutcome* out) {
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(options_.step_timeout_ms);
  const size_t n = shards_.size();
  std::vector<uint64_t> min_version(n, 0);
  std::vector<bool> pull(n, true);
  for (int round = 0; round < kMaxResyncRounds; ++round) {
    std::vector<Status> st(n);
    std::vector<PullOutcome> outcomes(n);
    ResyncRound(min_version, pull, deadline, params, &st, &outcomes);
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

void WorkerImpl::ResyncRound(const std::vector<uint64_t>& min_version,
                             const std::vector<bool>& pull, SteadyClock::time_point deadline,
                             std::span<float> params, std::vector<Status>* st,
                             std::vector<PullOutcome>* outcomes) {
  RunShardsWatchingInterrupt("the resynchronisation", [&](size_t i, StepAbort& abort) {
    if (!pull[i]) return;
    (*st)[i] = PullShard(shards_[i], min_version[i], /*want_full=*/true, deadline, params,
                         &(*outcomes)[i], /*repush=*/false, {}, nullptr, &abort);
  });
}

}  // namespace loco

#include "worker/training_loop.h"

#include <algorithm>
#include <atomic>
#include <span>

#include "common/log.h"
#include "worker/worker_events.h"

namespace loco {
namespace {

// Rejoins after an expiry at most this many times per process.
constexpr int kMaxRejoins = 16;

bool ShouldEval(const std::string& policy, uint32_t rank) {
  return policy == "all" || (policy == "rank0" && rank == 0);
}

}  // namespace

Status Failure(const std::string& what, const Status& s) {
  return Status(s.code(), what + ": " + s.ToString());
}

TrainingLoop::TrainingLoop(const TrainingLoopParts& parts)
    : parts_(parts),
      config_(*parts.config),
      task_(*parts.task),
      worker_(*parts.worker),
      params_(*parts.params),
      local_devices_(static_cast<uint32_t>(parts.config->local_devices)),
      steps_per_epoch_(parts.sampler->steps_per_epoch()),
      local_idx_(local_devices_),
      local_loss_(local_devices_, 0.0) {}

Status TrainingLoop::Run() {
  window_start_ = std::chrono::steady_clock::now();
  window_samples_ = 0;
  since_report_ = 0;
  while (worker_.step() < parts_.total_steps) {
    const uint64_t t = worker_.step();
    const uint32_t world = std::max<uint32_t>(worker_.world_size(), 1);
    const uint32_t rank = std::min(worker_.rank(), world - 1);
    const std::vector<size_t> idx = DrawSamples(t, world, rank);
    if (idx.empty() && !warned_empty_) {
      // More workers (or local ranks) than samples per step: zero gradients.
      LOG_WARN("world " << world << " x " << local_devices_
                        << " local device(s) > global batch: no samples for rank " << rank);
      warned_empty_ = true;
    }
    const std::optional<uint32_t> crc =
        config_.report_params_crc ? std::optional<uint32_t>(ParamsCrc(params_)) : std::nullopt;
    const StepOutcome step = parts_.runner ? StepOnLocalRanks(idx) : StepOnOneDevice(idx);
    if (step.gradient_failed) return Failure("computing the gradient", step.result.status());
    if (!step.result.ok() && worker_.expired() && rejoins_ < kMaxRejoins) {
      LOCO_RETURN_IF_ERROR(Rejoin(t, step.result.status()));
      continue;
    }
    if (!step.result.ok()) return Failure("step " + std::to_string(t), step.result.status());
    LOCO_RETURN_IF_ERROR(Record(t, rank, world, idx.size(), step, crc));
    LOCO_RETURN_IF_ERROR(EvaluateIfDue(t));
  }
  return Status::Ok();
}

std::vector<size_t> TrainingLoop::DrawSamples(uint64_t t, uint32_t world, uint32_t rank) {
  // Data order: local rank l of node `rank` takes the global positions
  // that rank rank·N + l of a flat world of world·N workers would take
  // (BatchSampler), so the node covers a contiguous run of the batch and
  // N = 1 is the plain layout. Indices are drawn here, on the training
  // thread (BatchSampler is not thread-safe).
  std::vector<size_t> idx;
  for (uint32_t local_rank = 0; local_rank < local_devices_; ++local_rank) {
    std::vector<size_t>& mine = local_idx_[local_rank];
    mine = parts_.sampler->Indices(t, world * local_devices_, rank * local_devices_ + local_rank);
    idx.insert(idx.end(), mine.begin(), mine.end());
  }
  return idx;
}

TrainingLoop::StepOutcome TrainingLoop::StepOnOneDevice(const std::vector<size_t>& idx) {
  StepOutcome out;
  // The gradient vector keeps the model's size: the worker's push
  // threads read the parts of it that are final while it is written.
  if (!parts_.gradient_on_device) grads_.resize(task_.num_parameters());
  const auto compute = [&](const GradientReady& ready) -> Status {
    if (idx.empty()) {
      std::fill(grads_.begin(), grads_.end(), 0.0f);
      return Status::Ok();
    }
    auto loss = task_.LossAndGradient(params_, idx, &grads_, ready);
    if (!loss.ok()) {
      out.gradient_failed = true;
      return loss.status();
    }
    out.loss = *loss;
    return Status::Ok();
  };
  // On a device, the gradient stays there and each shard is compressed
  // there (WorkerOptions::gradient_device); only payloads reach the host.
  const auto compute_on_device = [&](const GradientReady& ready) -> Status {
    auto loss = task_.LossAndDeviceGradient(params_, idx,
                                            config_.overlap_backward ? ready : GradientReady{});
    if (!loss.ok()) {
      out.gradient_failed = true;
      return loss.status();
    }
    out.loss = *loss;
    return Status::Ok();
  };
  if (parts_.gradient_on_device) {
    out.result = worker_.Step(compute_on_device, task_.device_gradient(), &params_);
  } else if (config_.overlap_backward) {
    out.result = worker_.Step(compute, grads_, &params_);
  } else {
    // No overlap: nothing goes before the whole gradient is final. The
    // computation still runs inside Step, so that the step's phases
    // (loco_worker_step_phase_seconds) count it.
    out.result = worker_.Step([&](const GradientReady& ready) -> Status {
      LOCO_RETURN_IF_ERROR(compute({}));
      ready(0);
      return Status::Ok();
    }, grads_, &params_);
  }
  return out;
}

TrainingLoop::StepOutcome TrainingLoop::StepOnLocalRanks(const std::vector<size_t>& idx) {
  StepOutcome out;
  std::atomic<bool> grad_failed{false};
  out.result = parts_.runner->Step([&](int local_rank, std::span<const float> at,
                                       std::vector<float>* g) -> Status {
    const size_t index = static_cast<size_t>(local_rank);
    local_loss_[index] = 0;
    if (local_idx_[index].empty()) {
      g->assign(task_.num_parameters(), 0.0f);
      return Status::Ok();
    }
    TrainingTask& mine = index == 0 ? task_ : *(*parts_.replicas)[index - 1];
    auto got = mine.LossAndGradient(at, local_idx_[index], g);
    if (!got.ok()) {
      grad_failed = true;
      return got.status();
    }
    local_loss_[index] = *got;
    return Status::Ok();
  });
  out.gradient_failed = grad_failed;
  if (out.gradient_failed) return out;
  // The node's loss: the local means weighted by their sample counts.
  for (uint32_t local_rank = 0; local_rank < local_devices_ && !idx.empty(); ++local_rank) {
    out.loss += local_loss_[local_rank] * static_cast<double>(local_idx_[local_rank].size()) /
                static_cast<double>(idx.size());
  }
  return out;
}

Status TrainingLoop::Rejoin(uint64_t t, const Status& why) {
  // Removed by the coordinator (stalled past the heartbeat timeout):
  // this step's gradient is dropped; join again and carry on.
  ++rejoins_;
  LOG_WARN("step " << t << ": " << why.ToString() << "; rejoining");
  EmitEvent(ExpiredEvent(worker_.worker_id(), t));
  if (Status s = worker_.Rejoin(*parts_.initial, &params_); !s.ok()) return Failure("rejoining", s);
  if (parts_.runner) {
    if (Status s = parts_.runner->Broadcast(); !s.ok()) {
      return Failure("broadcasting to local ranks", s);
    }
  }
  EmitEvent(JoinedEvent(worker_.worker_id(), worker_.step(), /*rejoin=*/true, ParamsCrc(params_)));
  return Status::Ok();
}

Status TrainingLoop::Record(uint64_t t, uint32_t rank, uint32_t world, size_t samples,
                            const StepOutcome& step, std::optional<uint32_t> params_crc) {
  const StepResult& r = step.result.value();
  window_samples_ += samples;
  parts_.metrics->OnStep(step.loss, samples);
  if (parts_.trace && samples > 0) {
    if (Status s = parts_.trace->Step(t, step.loss); !s.ok()) {
      return Failure("writing the trace", s);
    }
  }
  if (++since_report_ < static_cast<uint64_t>(config_.report_every) && !r.resynced) {
    return Status::Ok();
  }
  const auto now = std::chrono::steady_clock::now();
  const double secs = std::chrono::duration<double>(now - window_start_).count();
  const double samples_per_s = secs > 0 ? static_cast<double>(window_samples_) / secs : 0.0;
  parts_.metrics->OnThroughput(samples_per_s);
  StepEventFields f;
  f.worker = worker_.worker_id();
  f.rank = rank;
  f.world = world;
  f.step = t;
  f.loss = step.loss;
  f.samples_per_s = samples_per_s;
  f.traffic = worker_.traffic();
  f.resynced = r.resynced;
  f.params_crc = params_crc;
  f.nonfinite = r.nonfinite;
  f.step_s = r.seconds;
  f.compute_s = r.compute_seconds;
  EmitEvent(StepEvent(f));
  window_start_ = now;
  window_samples_ = 0;
  since_report_ = 0;
  return Status::Ok();
}

Status TrainingLoop::EvaluateIfDue(uint64_t t) {
  const uint64_t now_step = worker_.step();
  const uint64_t eval_period =
      config_.eval_every > 0 ? static_cast<uint64_t>(config_.eval_every) : steps_per_epoch_;
  if (now_step / eval_period > t / eval_period && now_step < parts_.total_steps &&
      ShouldEval(config_.eval, worker_.rank())) {
    auto e = EvaluateAt(now_step, /*emit=*/true);
    if (!e.ok()) return e.status();
  }
  return Status::Ok();
}

StatusOr<std::optional<double>> TrainingLoop::EvaluateAtEnd() {
  if (!ShouldEval(config_.eval, worker_.rank())) return std::optional<double>();
  const uint64_t step = worker_.step();
  auto e = EvaluateAt(step, /*emit=*/step % steps_per_epoch_ == 0);
  if (!e.ok()) return e.status();
  return std::optional<double>(e->accuracy);
}

StatusOr<EvalResult> TrainingLoop::EvaluateAt(uint64_t step, bool emit) {
  auto e = task_.Evaluate(params_);
  if (!e.ok()) return Failure("evaluating", e.status());
  if (parts_.trace) {
    const uint64_t epoch = step / steps_per_epoch_;
    if (Status s = parts_.trace->Eval(step, epoch, e->accuracy, e->loss); !s.ok()) {
      return Failure("writing the trace", s);
    }
  }
  if (emit) {
    EmitEvent(EvalEvent(worker_.worker_id(), step, step / steps_per_epoch_, e->accuracy, e->loss));
  }
  return e;
}

}  // namespace loco

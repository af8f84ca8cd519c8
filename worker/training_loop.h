// TrainingLoop: loco-worker's steps, from the join to the target step. Each
// step draws the node's samples (BatchSampler), computes the gradient on one
// device or on the local ranks (LocalGroupRunner), runs the Worker's step,
// joins again after an expiry, and reports the step and the evaluations that
// fall due: as progress events (worker/worker_events.h), in the trace and in
// the training metrics.
//
// Not thread-safe: it runs on the training thread, which owns everything it
// is given.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "data/batch_sampler.h"
#include "worker/group/local_group_runner.h"
#include "models/mlp.h"
#include "worker/trace_writer.h"
#include "worker/training_metrics.h"
#include "worker/training_task.h"
#include "client/worker.h"
#include "worker/worker_config.h"

namespace loco {

// What the loop works with. Owned by the caller; everything outlives the loop.
struct TrainingLoopParts {
  const WorkerConfig* config = nullptr;
  TrainingTask* task = nullptr;  // local rank 0's
  // Local rank r > 0 computes with (*replicas)[r - 1].
  const std::vector<std::unique_ptr<TrainingTask>>* replicas = nullptr;
  Worker* worker = nullptr;  // joined, its parameters initialised
  // With --local-devices > 1: the node's ranks; null with one local device.
  LocalGroupRunner* runner = nullptr;
  std::vector<float>* params = nullptr;          // the node's copy (the Worker's)
  const std::vector<float>* initial = nullptr;   // what a rejoin starts from
  BatchSampler* sampler = nullptr;
  TraceWriter* trace = nullptr;                  // with --trace-dir; else null
  TrainingMetrics* metrics = nullptr;
  uint64_t total_steps = 0;
  // The gradient stays on the CUDA device (WorkerOptions::gradient_device).
  bool gradient_on_device = false;
};

// `s` with `what` before it, as loco-worker logs the error that ends it
// ("joining: UNAVAILABLE: ..."): the message is the whole log line, the code
// is s's.
[[nodiscard]] Status Failure(const std::string& what, const Status& s);

class TrainingLoop {
 public:
  explicit TrainingLoop(const TrainingLoopParts& parts);

  // Steps until the Worker reaches total_steps. An error ends training; its
  // message is the log line (Failure).
  [[nodiscard]] Status Run();
  // The evaluation after the last step, when --eval names this worker:
  // traced, and reported as an eval event when that step ends an epoch (an
  // epoch's end mid-run is reported by Run). Returns its test accuracy, or
  // nullopt when this worker does not evaluate.
  [[nodiscard]] StatusOr<std::optional<double>> EvaluateAtEnd();

 private:
  // One step's outcome: the Worker's result, the node's loss, and whether
  // the gradient computation itself failed (which ends training, unlike a
  // step the cluster refused).
  struct StepOutcome {
    StatusOr<StepResult> result = Internal("no step ran");
    double loss = 0;
    bool gradient_failed = false;
  };

  // Step t's samples for node `rank` of `world`: each local rank's in
  // local_idx_, and all of them, in local rank order.
  std::vector<size_t> DrawSamples(uint64_t t, uint32_t world, uint32_t rank);
  StepOutcome StepOnOneDevice(const std::vector<size_t>& idx);
  StepOutcome StepOnLocalRanks(const std::vector<size_t>& idx);
  // After the coordinator removed this worker at step t (`why`).
  [[nodiscard]] Status Rejoin(uint64_t t, const Status& why);
  // Metrics, trace and, every --report-every steps, the step event.
  [[nodiscard]] Status Record(uint64_t t, uint32_t rank, uint32_t world, size_t samples,
                              const StepOutcome& step, std::optional<uint32_t> params_crc);
  // The evaluation at an eval period's end (--eval-every, or epochs).
  [[nodiscard]] Status EvaluateIfDue(uint64_t t);
  [[nodiscard]] StatusOr<EvalResult> EvaluateAt(uint64_t step, bool emit);

  TrainingLoopParts parts_;
  const WorkerConfig& config_;
  TrainingTask& task_;
  Worker& worker_;
  std::vector<float>& params_;
  uint32_t local_devices_;  // --local-devices
  uint64_t steps_per_epoch_;

  int rejoins_ = 0;
  bool warned_empty_ = false;
  std::vector<float> grads_;
  // Per local rank (--local-devices > 1): sample indices, loss.
  std::vector<std::vector<size_t>> local_idx_;
  std::vector<double> local_loss_;
  // The report window: since the last step event.
  std::chrono::steady_clock::time_point window_start_;
  uint64_t window_samples_ = 0;
  uint64_t since_report_ = 0;
};

}  // namespace loco

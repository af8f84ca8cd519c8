// TrainingMetrics: what a training loop reports about itself, registered in
// the same registry as the Worker's metrics (WorkerOptions::metrics_registry).
//
//   loco_worker_loss                  training loss of the last step
//   loco_worker_samples_per_second    samples per second over the report window
//   loco_worker_samples_total         samples trained on (rate() gives samples/s)
//
// Thread-safe (prometheus-cpp metrics are atomic).
#pragma once

#include <cstdint>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace loco {

class TrainingMetrics {
 public:
  // Registers the families in `registry`, which must outlive this object.
  explicit TrainingMetrics(prometheus::Registry& registry);

  void OnStep(double loss, uint64_t samples);
  void OnThroughput(double samples_per_second) { samples_per_second_.Set(samples_per_second); }

 private:
  prometheus::Gauge& loss_;
  prometheus::Gauge& samples_per_second_;
  prometheus::Counter& samples_;
};

}  // namespace loco

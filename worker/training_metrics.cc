#include "worker/training_metrics.h"

#include <cmath>

namespace loco {

TrainingMetrics::TrainingMetrics(prometheus::Registry& r)
    : loss_(prometheus::BuildGauge()
                .Name("loco_worker_loss")
                .Help("Training loss of the last step")
                .Register(r)
                .Add({})),
      samples_per_second_(prometheus::BuildGauge()
                              .Name("loco_worker_samples_per_second")
                              .Help("Samples per second over the last report window")
                              .Register(r)
                              .Add({})),
      samples_(prometheus::BuildCounter()
                   .Name("loco_worker_samples_total")
                   .Help("Samples trained on by this worker")
                   .Register(r)
                   .Add({})) {}

void TrainingMetrics::OnStep(double loss, uint64_t samples) {
  // A step without samples has no loss: keep the last one.
  if (samples > 0 && std::isfinite(loss)) loss_.Set(loss);
  samples_.Increment(static_cast<double>(samples));
}

}  // namespace loco

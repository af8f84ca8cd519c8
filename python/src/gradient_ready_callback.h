// GradientReadyCallback: the `ready` that _core.Worker.step_overlapped hands
// to the Python gradient computation. ready(ready_from) tells the worker
// that grads[ready_from:] is final, so that those parts are compressed and
// pushed while the computation goes on (common/gradient_ready.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/gradient_ready.h"

namespace loco::python {

// Owned by Python (the computation may keep a reference to it); valid only
// while the computation runs: the step expires it when the computation
// returns, and a later call raises RuntimeError. Called with the GIL held,
// on the thread that runs the computation.
class GradientReadyCallback {
 public:
  // `ready` must outlive the callback's valid period (until Expire).
  GradientReadyCallback(const GradientReady* ready, size_t num_elements)
      : ready_(ready), num_elements_(num_elements) {}

  // ValueError unless 0 <= ready_from <= the gradient's size; RuntimeError
  // once expired. A ready_from above an earlier one is ignored (the final
  // part never shrinks).
  void operator()(int64_t ready_from) const;
  void Expire() { ready_ = nullptr; }

 private:
  const GradientReady* ready_;  // null once expired
  size_t num_elements_;
};

}  // namespace loco::python

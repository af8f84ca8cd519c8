// EvalResult: what a built-in model's evaluation on held-out data reports.
#pragma once

namespace loco {

struct EvalResult {
  double accuracy = 0;  // fraction of correct argmax predictions
  double loss = 0;      // mean cross-entropy
};

}  // namespace loco

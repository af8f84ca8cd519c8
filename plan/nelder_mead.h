// MinimizeNelderMead: the downhill simplex method (Nelder and Mead, 1965)
// for a few unconstrained parameters, deterministic (fixed start simplex,
// fixed iteration count), for the calibration's fit. No derivatives: the
// cost model's max() terms have none at their kinks.
#pragma once

#include <functional>
#include <vector>

namespace loco::plan {

struct SimplexResult {
  std::vector<double> x;
  double value = 0;
};

// Minimises `f` from `start`, the start simplex's edges `step` long along
// each axis, for `iterations` steps of reflection, expansion, contraction
// or shrink. Precondition: start is non-empty, step > 0.
SimplexResult MinimizeNelderMead(const std::function<double(const std::vector<double>&)>& f,
                                 const std::vector<double>& start, double step, int iterations);

}  // namespace loco::plan

// HardGradient: the gradients the vector paths of cpu::LocoCompress are
// checked with, bit for bit against the portable path: random, with a hard
// case chosen by the step (non-finite entries, a zero block and a block of
// subnormals, near-overflow values, tiny normal values, an all-zero last
// block). Shared by the kernels' path tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "tests/kernels/spec_reference.h"

namespace loco {

// The gradient of step t: random, with step-dependent hard cases.
inline std::vector<float> HardGradient(size_t n, size_t block, int64_t t, uint32_t seed) {
  std::vector<float> g = testing_ref::RandomVector(n, seed + static_cast<uint32_t>(t));
  const float inf = std::numeric_limits<float>::infinity();
  switch (t % 7) {
    case 1:  // non-finite entries, one in the last (maybe partial) block
      g[3] = std::numeric_limits<float>::quiet_NaN();
      g[n / 2] = -inf;
      g[n - 1] = inf;
      break;
    case 2:  // a zero block, and a block of subnormals (the division rule)
      for (size_t i = 0; i < block && i < n; ++i) g[i] = 0.0f;
      for (size_t i = block; i < 2 * block && i < n; ++i) {
        g[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(i % 7) *
               (i % 2 != 0 ? 1.0f : -1.0f);
      }
      break;
    case 3:  // near-overflow values: h may overflow, e may not be finite
      for (size_t i = 0; i < n; i += 5) g[i] = (i % 2 != 0 ? 1.0f : -1.0f) * 3.3e38f;
      break;
    case 4:  // tiny but normal values
      for (float& x : g) x *= 1e-36f;
      break;
    case 5:  // every value of the last block zero (a partial block's scale 0)
      for (size_t i = (n - 1) / block * block; i < n; ++i) g[i] = 0.0f;
      break;
    default:
      break;
  }
  return g;
}

}  // namespace loco

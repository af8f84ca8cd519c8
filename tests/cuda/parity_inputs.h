// Test inputs and comparisons shared by the CUDA parity tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace loco::testing {

// Skips the current test when no CUDA device is present.
#define LOCO_REQUIRE_CUDA_DEVICE()                                            \
  do {                                                                        \
    if (::loco::cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";   \
  } while (0)

// n values cut into blocks of `block` that cycle through shapes chosen to hit
// every rule of the quantizer: Gaussian, exact halves (x = (j + 1/2) * 2^-3
// with a block absmax of qmax * 2^-3, so scale is exact and round-half-even
// decides), zeros and -0, denormals whose absmax/qmax underflows, values near
// ±FLT_MAX, NaN/±Inf mixed with normal values, wide uniform, and log-uniform
// over 70 decades. With extremes = false only the finite, moderate shapes.
std::vector<float> QuantizerInput(size_t n, int block, int bits, uint32_t seed, bool extremes);

// Bit patterns, so NaN == NaN and -0 != +0.
std::vector<uint32_t> FloatBits(const std::vector<float>& v);

// Distance in units in the last place between two finite floats (0 when
// identical, huge when the signs differ and neither is zero).
uint64_t UlpDistance(float a, float b);

// Success when every pair is finite and at most max_ulp apart; otherwise a
// failure naming the first element that is not.
::testing::AssertionResult WithinUlps(const std::vector<float>& expected,
                                      const std::vector<float>& actual, uint64_t max_ulp);

}  // namespace loco::testing

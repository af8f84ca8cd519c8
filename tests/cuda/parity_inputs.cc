#include "parity_inputs.h"

#include <bit>
#include <cmath>
#include <limits>

namespace loco::testing {

std::vector<float> QuantizerInput(size_t n, int block, int bits, uint32_t seed, bool extremes) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const int qmax = (1 << (bits - 1)) - 1;
  const float kMax = std::numeric_limits<float>::max();
  const float kDenormMin = std::numeric_limits<float>::denorm_min();
  std::vector<float> x(n);
  const size_t b = static_cast<size_t>(block);
  for (size_t start = 0, blk = 0; start < n; start += b, ++blk) {
    const size_t end = std::min(n, start + b);
    const int shape = static_cast<int>(blk % (extremes ? 8 : 4));
    for (size_t i = start; i < end; ++i) {
      float v = 0.0f;
      switch (shape) {
        case 0: v = normal(rng); break;
        case 1: {  // exact halves under an exact scale of 2^-3
          const int j = static_cast<int>(rng() % static_cast<uint32_t>(2 * qmax)) - qmax;
          v = (static_cast<float>(j) + 0.5f) * 0.125f;
          if (i == start) v = static_cast<float>(qmax) * 0.125f;
          break;
        }
        case 2: v = (rng() % 3 == 0) ? -0.0f : 0.0f; break;
        case 3: v = normal(rng) * 1e6f; break;
        case 4:  // denormals; absmax/qmax underflows when absmax < qmax * 2^-150
          v = static_cast<float>(static_cast<int>(rng() % 3) - 1) * kDenormMin;
          break;
        case 5: v = (rng() % 2 ? 1.0f : -1.0f) * kMax * (0.5f + 0.5f * unit(rng)); break;
        case 6: {
          const uint32_t r = rng() % 16;
          v = r == 0 ? std::numeric_limits<float>::quiet_NaN()
              : r == 1 ? std::numeric_limits<float>::infinity()
              : r == 2 ? -std::numeric_limits<float>::infinity()
                       : normal(rng);
          break;
        }
        default:
          v = (rng() % 2 ? 1.0f : -1.0f) * std::exp(unit(rng) * 160.0f - 80.0f);
          break;
      }
      x[i] = v;
    }
  }
  return x;
}

std::vector<uint32_t> FloatBits(const std::vector<float>& v) {
  std::vector<uint32_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = std::bit_cast<uint32_t>(v[i]);
  return bits;
}

uint64_t UlpDistance(float a, float b) {
  // Map the float order onto the integers: negative floats count down from 0.
  auto key = [](float f) {
    const int64_t u = std::bit_cast<uint32_t>(f);
    return u & 0x80000000 ? -(u & 0x7FFFFFFF) : u;
  };
  const int64_t d = key(a) - key(b);
  return static_cast<uint64_t>(d < 0 ? -d : d);
}

::testing::AssertionResult WithinUlps(const std::vector<float>& expected,
                                      const std::vector<float>& actual, uint64_t max_ulp) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << expected.size() << " vs " << actual.size();
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!std::isfinite(expected[i]) || !std::isfinite(actual[i]) ||
        UlpDistance(expected[i], actual[i]) > max_ulp) {
      return ::testing::AssertionFailure()
             << "element " << i << ": expected " << expected[i] << ", got " << actual[i] << " ("
             << UlpDistance(expected[i], actual[i]) << " ulp apart, tolerance " << max_ulp << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace loco::testing

// FiniteSquaredNorm, the gradient norm the worker's metrics report, against
// a one-element-at-a-time double reference: with every element finite, with
// NaN and infinities (skipped), and with the largest finite floats (whose
// squares must not overflow).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "client/worker_metrics.h"

namespace loco {
namespace {

double Reference(const std::vector<float>& g) {
  double sq = 0;
  for (float x : g) {
    if (std::isfinite(x)) sq += static_cast<double>(x) * static_cast<double>(x);
  }
  return sq;
}

std::vector<float> Gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1e-3f);
  std::vector<float> g(n);
  for (float& x : g) x = d(rng);
  return g;
}

TEST(FiniteSquaredNormTest, MatchesTheReferenceForFiniteGradients) {
  for (size_t n : {0u, 1u, 7u, 8u, 9u, 1000u, 100003u}) {
    SCOPED_TRACE(n);
    const std::vector<float> g = Gaussian(n, static_cast<uint32_t>(n) + 1);
    const double want = Reference(g);
    EXPECT_NEAR(FiniteSquaredNorm(g), want, 1e-12 * want);
  }
}

TEST(FiniteSquaredNormTest, SkipsNonFiniteElementsAndKeepsTheLargestFiniteOnes) {
  std::vector<float> g = Gaussian(10007, 3);
  g[0] = std::numeric_limits<float>::quiet_NaN();
  g[5] = std::numeric_limits<float>::infinity();
  g[10006] = -std::numeric_limits<float>::infinity();  // in the tail after the lanes
  const double want = Reference(g);
  ASSERT_TRUE(std::isfinite(want));
  EXPECT_NEAR(FiniteSquaredNorm(g), want, 1e-12 * want);

  std::vector<float> big(17, std::numeric_limits<float>::max());
  big[3] = -std::numeric_limits<float>::max();
  const double max_sq = static_cast<double>(std::numeric_limits<float>::max()) *
                        static_cast<double>(std::numeric_limits<float>::max());
  EXPECT_NEAR(FiniteSquaredNorm(big), 17 * max_sq, 1e-12 * 17 * max_sq);
}

}  // namespace
}  // namespace loco

#include "kernels/adamw.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace loco {
namespace {

std::vector<float> Params(size_t n, uint32_t seed) {
  // Magnitudes in [0.5, 2] so that relative tolerances on p are meaningful.
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.5f, 2.0f);
  std::vector<float> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = (i % 2 ? -1.0f : 1.0f) * mag(rng);
  return p;
}

std::vector<float> Grad(size_t n, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> g(n);
  for (auto& x : g) x = nd(rng);
  return g;
}

struct Config {
  const char* name;
  float weight_decay;
  float max_grad_norm;
};

// One AdamW step in double from the given state, the formula of adamw.h.
struct RefStep {
  double p, m, v;
};
RefStep AdamWRef(double p, double m, double v, double g, int64_t t, const AdamWParams& a,
                 double grad_scale) {
  const double lr = a.lr, b1 = a.beta1, b2 = a.beta2;
  const double gs = g * grad_scale;
  RefStep r;
  p *= 1.0 - lr * static_cast<double>(a.weight_decay);
  r.m = b1 * m + (1.0 - b1) * gs;
  r.v = b2 * v + (1.0 - b2) * gs * gs;
  const double mhat = r.m / (1.0 - std::pow(b1, static_cast<double>(t)));
  const double vhat = r.v / (1.0 - std::pow(b2, static_cast<double>(t)));
  r.p = p - lr * mhat / (std::sqrt(vhat) + a.eps);
  return r;
}

double ClipRef(const std::vector<float>& g, float max_norm) {
  if (max_norm <= 0) return 1.0;
  double sq = 0;
  for (float x : g) sq += static_cast<double>(x) * x;
  return std::min(1.0, max_norm / (std::sqrt(sq) + 1e-6));
}

const Config kConfigs[] = {
    {"plain", 0.0f, 0.0f},
    {"weight decay", 0.1f, 0.0f},
    {"decay and clipping", 0.1f, 1.0f},
};

// 100 steps. At every step the kernel's new parameters are compared, with
// relative tolerance 1e-6, to one double-precision step taken from the
// kernel's previous (fp32) state; m and v to 1e-6 of their terms' magnitudes.
TEST(AdamWTest, EveryStepMatchesDoubleReference) {
  const size_t n = 1000;
  for (const Config& c : kConfigs) {
    SCOPED_TRACE(c.name);
    AdamWParams a;
    a.lr = 1e-3f;
    a.weight_decay = c.weight_decay;
    a.max_grad_norm = c.max_grad_norm;
    std::vector<float> p = Params(n, 1), m(n, 0.0f), v(n, 0.0f);
    bool clipped = false;
    for (int64_t t = 1; t <= 100; ++t) {
      const std::vector<float> g = Grad(n, static_cast<uint32_t>(t), 2.0f);
      const float scale = ClipScale(std::sqrt(cpu::SquaredNorm(g.data(), n)), a.max_grad_norm);
      ASSERT_NEAR(scale, ClipRef(g, a.max_grad_norm), 1e-7 * scale);
      clipped |= scale < 1.0f;
      const std::vector<float> p0 = p, m0 = m, v0 = v;
      ASSERT_TRUE(cpu::AdamW(p.data(), m.data(), v.data(), g.data(), n, t, a, scale).ok());
      for (size_t i = 0; i < n; ++i) {
        const RefStep r = AdamWRef(p0[i], m0[i], v0[i], g[i], t, a, scale);
        ASSERT_NEAR(p[i], r.p, 1e-6 * std::fabs(r.p)) << "step " << t << " i " << i;
        const double gs = static_cast<double>(g[i]) * scale;
        ASSERT_NEAR(m[i], r.m, 1e-6 * (std::fabs(m0[i]) + std::fabs(gs))) << "step " << t;
        ASSERT_NEAR(v[i], r.v, 1e-6 * (v0[i] + gs * gs)) << "step " << t;
      }
    }
    EXPECT_EQ(clipped, c.max_grad_norm > 0);
  }
}

// The whole 100-step fp32 trajectory against an independent double one. p is
// rounded twice per step (decay, update), each time by at most 2^-24 |p|, so
// the drift is bounded by 100 * 2 * 2^-24 |p| ~ 1.2e-5 |p|; checked at 1.5e-5.
TEST(AdamWTest, TrajectoryStaysWithinAccumulatedRounding) {
  const size_t n = 1000;
  for (const Config& c : kConfigs) {
    SCOPED_TRACE(c.name);
    AdamWParams a;
    a.lr = 1e-2f;
    a.weight_decay = c.weight_decay;
    a.max_grad_norm = c.max_grad_norm;
    std::vector<float> p = Params(n, 2), m(n, 0.0f), v(n, 0.0f);
    std::vector<double> rp(p.begin(), p.end()), rm(n, 0.0), rv(n, 0.0);
    for (int64_t t = 1; t <= 100; ++t) {
      const std::vector<float> g = Grad(n, static_cast<uint32_t>(500 + t), 1.0f);
      const float scale = ClipScale(std::sqrt(cpu::SquaredNorm(g.data(), n)), a.max_grad_norm);
      ASSERT_TRUE(cpu::AdamW(p.data(), m.data(), v.data(), g.data(), n, t, a, scale).ok());
      const double ref_scale = ClipRef(g, a.max_grad_norm);
      for (size_t i = 0; i < n; ++i) {
        const RefStep r = AdamWRef(rp[i], rm[i], rv[i], g[i], t, a, ref_scale);
        rp[i] = r.p;
        rm[i] = r.m;
        rv[i] = r.v;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(p[i], rp[i], 1.5e-5 * std::fabs(rp[i])) << i;
    }
  }
}

TEST(AdamWTest, ClipScaleClosedForm) {
  EXPECT_EQ(ClipScale(100.0, 0.0f), 1.0f);
  EXPECT_EQ(ClipScale(0.5, 1.0f), 1.0f);
  EXPECT_EQ(ClipScale(0.0, 1.0f), 1.0f);
  EXPECT_EQ(ClipScale(10.0, 1.0f), static_cast<float>(1.0 / (10.0 + 1e-6)));
  EXPECT_EQ(ClipScale(4.0, 2.0f), static_cast<float>(2.0 / (4.0 + 1e-6)));
  EXPECT_EQ(ClipScale(std::numeric_limits<double>::infinity(), 1.0f), 0.0f);
  EXPECT_EQ(ClipScale(std::numeric_limits<double>::quiet_NaN(), 1.0f), 0.0f);
}

// Lanes carried across pieces whose lengths are multiples of 8 give the
// one-call SquaredNorm exactly; a piece of odd length in the middle shifts
// the lanes, so it is not required to.
TEST(AdamWTest, SquaredNormInPiecesEqualsOneCallBitForBit) {
  const size_t n = 100003;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = std::sin(0.37 * static_cast<double>(i)) * (1 + i % 13);
  const double whole = cpu::SquaredNorm(x.data(), n);
  for (size_t piece : {size_t{8}, size_t{64}, size_t{65536}, n}) {
    double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t b = 0; b < n; b += piece) cpu::AddSquaredNormLanes(x.data() + b, std::min(piece, n - b), lanes);
    const double got = cpu::CombineSquaredNormLanes(lanes);
    EXPECT_EQ(0, std::memcmp(&got, &whole, sizeof got)) << piece << ": " << got << " vs " << whole;
  }
}

TEST(AdamWTest, SquaredNormMatchesLongDoubleSum) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{1000}, size_t{100003}}) {
    const std::vector<float> x = Grad(n, 3, 3.0f);
    long double want = 0;
    for (float v : x) want += static_cast<long double>(v) * v;
    EXPECT_NEAR(cpu::SquaredNorm(x.data(), n), static_cast<double>(want),
                1e-12 * static_cast<double>(want))
        << n;
  }
  const std::vector<float> big = {3e38f, -3e38f};  // squares overflow fp32, not double
  const double b = big[0];
  EXPECT_DOUBLE_EQ(cpu::SquaredNorm(big.data(), 2), 2.0 * b * b);
}

TEST(AdamWTest, InvalidInputsAreRejectedAndChangeNothing) {
  const size_t n = 16;
  std::vector<float> p(n, 1.0f), m(n, 0.5f), v(n, 0.25f);
  const std::vector<float> g(n, 1.0f);
  auto expect_rejected = [&](const AdamWParams& a, int64_t step, float scale, const std::string& fragment) {
    const Status s = cpu::AdamW(p.data(), m.data(), v.data(), g.data(), n, step, a, scale);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << fragment;
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(p[i], 1.0f);
      ASSERT_EQ(m[i], 0.5f);
      ASSERT_EQ(v[i], 0.25f);
    }
  };
  AdamWParams a;
  a.lr = -1.0f;
  expect_rejected(a, 1, 1.0f, "lr -1 is not a finite value >= 0");
  a = AdamWParams();
  a.lr = std::numeric_limits<float>::quiet_NaN();
  expect_rejected(a, 1, 1.0f, "lr nan");
  a = AdamWParams();
  a.beta1 = 1.0f;
  expect_rejected(a, 1, 1.0f, "beta1 1 is not in [0, 1)");
  a = AdamWParams();
  a.beta2 = -0.1f;
  expect_rejected(a, 1, 1.0f, "beta2 -0.1 is not in [0, 1)");
  a = AdamWParams();
  a.eps = 0.0f;
  expect_rejected(a, 1, 1.0f, "eps 0 is not a finite value > 0");
  a = AdamWParams();
  a.weight_decay = -0.01f;
  expect_rejected(a, 1, 1.0f, "weight_decay -0.01");
  a = AdamWParams();
  a.max_grad_norm = -1.0f;
  expect_rejected(a, 1, 1.0f, "max_grad_norm -1");
  expect_rejected(AdamWParams(), 0, 1.0f, "step 0 is not >= 1");
  expect_rejected(AdamWParams(), 1, std::numeric_limits<float>::infinity(), "grad_scale inf");
  EXPECT_FALSE(cpu::AdamW(nullptr, m.data(), v.data(), g.data(), n, 1, AdamWParams(), 1.0f).ok());
  EXPECT_TRUE(ValidateAdamWParams(AdamWParams()).ok());
}

// ValidatedAdamWParams carries the hyper-parameters checked once: Validate
// refuses what ValidateAdamWParams refuses, with its message; the AdamW form
// that takes it steps exactly as the checking form and still checks the call.
TEST(AdamWTest, ValidatedParamsStepAsTheCheckingFormAndStillCheckTheCall) {
  AdamWParams bad;
  bad.beta1 = 1.0f;
  const StatusOr<ValidatedAdamWParams> refused = ValidatedAdamWParams::Validate(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), ValidateAdamWParams(bad).message());

  AdamWParams a;
  a.lr = 1e-2f;
  a.weight_decay = 0.1f;
  StatusOr<ValidatedAdamWParams> valid = ValidatedAdamWParams::Validate(a);
  ASSERT_TRUE(valid.ok());
  EXPECT_EQ(valid->get().lr, a.lr);
  EXPECT_EQ(valid->get().weight_decay, a.weight_decay);

  const size_t n = 1000;
  const std::vector<float> g = Grad(n, 5, 0.1f);
  std::vector<float> p1 = Params(n, 6), m1(n, 0.0f), v1(n, 0.0f);
  std::vector<float> p2 = p1, m2 = m1, v2 = v1;
  for (int64_t t = 1; t <= 3; ++t) {
    ASSERT_TRUE(cpu::AdamW(p1.data(), m1.data(), v1.data(), g.data(), n, t, a, 0.5f).ok());
    ASSERT_TRUE(
        cpu::AdamW(p2.data(), m2.data(), v2.data(), g.data(), n, t, valid.value(), 0.5f).ok());
  }
  EXPECT_EQ(0, std::memcmp(p1.data(), p2.data(), n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(m1.data(), m2.data(), n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(v1.data(), v2.data(), n * sizeof(float)));

  const std::vector<float> before = p2;
  const Status step0 =
      cpu::AdamW(p2.data(), m2.data(), v2.data(), g.data(), n, 0, valid.value(), 1.0f);
  EXPECT_NE(step0.message().find("step 0 is not >= 1"), std::string::npos) << step0.message();
  const Status nan_scale = cpu::AdamW(p2.data(), m2.data(), v2.data(), g.data(), n, 1,
                                      valid.value(), std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan_scale.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(cpu::AdamW(p2.data(), nullptr, v2.data(), g.data(), n, 1, valid.value(), 1.0f).ok());
  EXPECT_EQ(p2, before);
}

}  // namespace
}  // namespace loco

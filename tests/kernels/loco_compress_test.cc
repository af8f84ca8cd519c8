#include "kernels/loco_compress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tests/common/same_bits.h"
#include "tests/kernels/spec_reference.h"

namespace loco {
namespace {

using testing_ref::RandomVector;
using testing_ref::UnpackRef;

struct Payload {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  LocoStats stats;
};

Payload Compress(const std::vector<float>& g, int64_t step, const LocoParams& p, ErrorState& st) {
  Payload out;
  out.codes.assign(PackedBytes(g.size(), p.bits), 0);
  out.scales.assign(NumBlocks(g.size(), p.block_size), 0.0f);
  const Status s = cpu::LocoCompress(g.data(), g.size(), step, p, st.view(), out.codes.data(),
                                     out.scales.data(), &out.stats);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// D(payload) in double: code * scale is exact in double.
std::vector<double> DecodeDouble(const Payload& pl, size_t n, const LocoParams& p) {
  const std::vector<int> codes = UnpackRef(pl.codes.data(), n, p.bits);
  std::vector<double> d(n);
  for (size_t i = 0; i < n; ++i) {
    d[i] = static_cast<double>(codes[i]) * pl.scales[i / static_cast<size_t>(p.block_size)];
  }
  return d;
}

// The stored error ê in double.
std::vector<double> StoredError(const ErrorState& st, int block) {
  std::vector<double> e(st.size());
  for (size_t i = 0; i < st.size(); ++i) {
    e[i] = st.values().empty()
               ? static_cast<double>(st.codes()[i]) * st.scales()[i / static_cast<size_t>(block)]
               : st.values()[i];
  }
  return e;
}

TEST(LocoCompressTest, MatchesScalarReferenceBitForBitInEveryMode) {
  const size_t n = 3 * 128 + 45;
  for (CompensationMode mode : {CompensationMode::kNaive, CompensationMode::kEf, CompensationMode::kLoco}) {
    for (int error_bits : {8, 32}) {
      for (Rounding rounding : {Rounding::kNearest, Rounding::kStochastic}) {
        for (int bits : {2, 4, 8}) {
          LocoParams p;
          p.mode = mode;
          p.bits = bits;
          p.error_bits = error_bits;
          p.beta = 0.7f;
          p.reset_period = 7;
          p.rounding = rounding;
          p.seed = 5;
          p.index_offset = 1280;
          SCOPED_TRACE(::testing::Message() << "mode " << static_cast<int>(mode) << " error_bits "
                                            << error_bits << " rounding " << static_cast<int>(rounding)
                                            << " bits " << bits);
          ErrorState st(n, p.block_size, error_bits);
          testing_ref::ErrorRef ref = testing_ref::MakeErrorRef(n, p.block_size, error_bits);
          for (int64_t step = 0; step < 20; ++step) {
            std::vector<float> g = RandomVector(n, static_cast<uint32_t>(step + 100 * bits));
            if (step == 3) {
              g[5] = std::numeric_limits<float>::quiet_NaN();
              g[300] = -std::numeric_limits<float>::infinity();
            }
            p.seed = static_cast<uint64_t>(step);
            const Payload got = Compress(g, step, p, st);
            const testing_ref::LocoOut want = testing_ref::LocoStepRef(g, step, p, ref);
            ASSERT_EQ(got.codes, testing_ref::PackRef(want.payload.codes, bits)) << "step " << step;
            for (size_t b = 0; b < want.payload.scales.size(); ++b) {
              ASSERT_TRUE(SameBits(got.scales[b], want.payload.scales[b])) << "step " << step;
            }
            ASSERT_EQ(got.stats.nonfinite, want.payload.nonfinite);
            if (mode == CompensationMode::kNaive) continue;
            if (error_bits == 8) {
              for (size_t i = 0; i < n; ++i) ASSERT_EQ(st.codes()[i], ref.codes[i]) << "step " << step << " i " << i;
              for (size_t b = 0; b < ref.scales.size(); ++b) ASSERT_TRUE(SameBits(st.scales()[b], ref.scales[b]));
            } else {
              for (size_t i = 0; i < n; ++i) ASSERT_TRUE(SameBits(st.values()[i], ref.values[i])) << "step " << step << " i " << i;
            }
            ASSERT_NEAR(got.stats.error_sq_norm, want.error_sq_norm, 1e-12 * want.error_sq_norm);
          }
        }
      }
    }
  }
}

// Classic error feedback with an fp32 error telescopes: ĥ_t + ê_{t+1} = g_t + ê_t
// up to the two fp32 roundings of h = g + ê and r = h - ĥ, so
//   Σ_t D(q_t) + ê_T = Σ_t g_t + Σ_t (ε_h + ε_r),  |ε| <= 2^-24 |operand result|.
// Checked per element with the bound Σ_t 2^-23 (|g_t| + |ê_t| + |ĥ_t|), which
// covers both roundings with a factor of 2 to spare.
TEST(LocoCompressTest, ErrorFeedbackFp32TelescopesToTheGradientSum) {
  const size_t n = 1000;
  LocoParams p;
  p.mode = CompensationMode::kEf;
  p.error_bits = 32;
  ErrorState st(n, p.block_size, 32);
  std::vector<double> sent(n, 0.0), sum_g(n, 0.0), tol(n, 0.0);
  for (int64_t t = 0; t < 50; ++t) {
    const std::vector<float> g = RandomVector(n, static_cast<uint32_t>(t + 1));
    const std::vector<double> ehat = StoredError(st, p.block_size);
    const Payload pl = Compress(g, t, p, st);
    const std::vector<double> d = DecodeDouble(pl, n, p);
    for (size_t i = 0; i < n; ++i) {
      sent[i] += d[i];
      sum_g[i] += g[i];
      tol[i] += std::ldexp(std::fabs(g[i]) + std::fabs(ehat[i]) + std::fabs(d[i]), -23);
    }
  }
  const std::vector<double> e_final = StoredError(st, p.block_size);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(sent[i] + e_final[i], sum_g[i], tol[i]) << "element " << i;
  }
}

// With the error stored in int8, each step adds the storage error
// ê_{t+1} - e_{t+1}, bounded by scale8_{t+1}/2 per element (plus fp32
// slack), so the residual is bounded by Σ_t scale8_t / 2 of the element's block.
TEST(LocoCompressTest, ErrorFeedbackInt8ResidualIsBoundedByStorageError) {
  const size_t n = 1000;
  LocoParams p;
  p.mode = CompensationMode::kEf;
  p.error_bits = 8;
  ErrorState st(n, p.block_size, 8);
  std::vector<double> sent(n, 0.0), sum_g(n, 0.0), bound(n, 0.0);
  for (int64_t t = 0; t < 50; ++t) {
    const std::vector<float> g = RandomVector(n, static_cast<uint32_t>(t + 1));
    const std::vector<double> ehat = StoredError(st, p.block_size);
    const Payload pl = Compress(g, t, p, st);
    const std::vector<double> d = DecodeDouble(pl, n, p);
    for (size_t i = 0; i < n; ++i) {
      sent[i] += d[i];
      sum_g[i] += g[i];
      bound[i] += 0.5 * st.scales()[i / 128] +
                  std::ldexp(std::fabs(g[i]) + 2 * std::fabs(ehat[i]) + std::fabs(d[i]), -22);
    }
  }
  const std::vector<double> e_final = StoredError(st, p.block_size);
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double residual = std::fabs(sent[i] + e_final[i] - sum_g[i]);
    ASSERT_LE(residual, bound[i]) << "element " << i;
    worst = std::max(worst, residual / bound[i]);
  }
  EXPECT_GT(worst, 0.0);  // the int8 storage error is real, not hidden by the check
}

// LoCo: the stored error follows e = β ê + (1-β)(h - ĥ), re-quantized to int8.
// Each step is recomputed in double from the kernel's previous state and its
// payload. The kernel works in fp32, so its e differs from the double e by at
// most a few roundings: slack_i = 1e-6 (|ê_i| + |h_i| + |ĥ_i|) (4 roundings of
// 2^-24 need 2.4e-7). The new stored error must be within the int8 storage
// bound scale8/2 of the exact e, plus that slack, and scale8 must equal
// max|e|/127 up to the slack. Codes are computed as e * (127 / max|e|), not
// e / scale8: three roundings of a value <= 127 code units, so the storage
// bound gets 127 * 2^-22 * scale8 more (kernels/quantize_inl.h). After a
// reset step the state is exactly zero.
TEST(LocoCompressTest, LocoStateFollowsDoubleRecurrenceAndResets) {
  const size_t n = 3 * 128 + 17;
  for (float beta : {0.5f, 0.9f}) {
    LocoParams p;
    p.mode = CompensationMode::kLoco;
    p.beta = beta;
    p.reset_period = 10;
    ErrorState st(n, p.block_size, 8);
    size_t same_codes = 0, total_codes = 0;
    for (int64_t t = 0; t < 30; ++t) {
      SCOPED_TRACE(::testing::Message() << "beta " << beta << " step " << t);
      const std::vector<float> g = RandomVector(n, static_cast<uint32_t>(1000 + t));
      const std::vector<double> ehat = StoredError(st, p.block_size);
      const Payload pl = Compress(g, t, p, st);
      const std::vector<double> hhat = DecodeDouble(pl, n, p);
      if ((t + 1) % 10 == 0) {
        for (int8_t c : st.codes()) ASSERT_EQ(c, 0);
        for (float s : st.scales()) ASSERT_TRUE(SameBits(s, 0.0f));
        EXPECT_EQ(pl.stats.error_sq_norm, 0.0);
        continue;
      }
      double sq = 0;
      for (size_t b0 = 0; b0 < n; b0 += 128) {
        const size_t len = std::min<size_t>(128, n - b0);
        std::vector<double> e(len), slack(len);
        double h_absmax = 0, e_absmax = 0, slack_max = 0;
        for (size_t i = 0; i < len; ++i) {
          const double h = static_cast<double>(g[b0 + i]) + ehat[b0 + i];
          h_absmax = std::max(h_absmax, std::fabs(h));
          e[i] = beta * ehat[b0 + i] + (1.0 - beta) * (h - hhat[b0 + i]);
          e_absmax = std::max(e_absmax, std::fabs(e[i]));
          slack[i] = 1e-6 * (std::fabs(ehat[b0 + i]) + std::fabs(h) + std::fabs(hhat[b0 + i]));
          slack_max = std::max(slack_max, slack[i]);
        }
        const double s = pl.scales[b0 / 128];
        ASSERT_NEAR(s, h_absmax / 7, 1e-6 * s);
        const double s8_ref = e_absmax / 127;
        const double s8 = st.scales()[b0 / 128];
        ASSERT_NEAR(s8, s8_ref, slack_max / 127 + 1e-6 * s8_ref);
        for (size_t i = 0; i < len; ++i) {
          const double h = static_cast<double>(g[b0 + i]) + ehat[b0 + i];
          ASSERT_LE(std::fabs(h - hhat[b0 + i]), 0.5 * s * (1 + 1e-5)) << i;
          const double stored = static_cast<double>(st.codes()[b0 + i]) * s8;
          ASSERT_LE(std::fabs(stored - e[i]), 0.5 * s8 * (1 + 1e-6) + 127 * std::ldexp(s8, -22) + slack[i])
              << i;
          const int ref_code = static_cast<int>(std::nearbyint(e[i] / s8_ref));
          same_codes += ref_code == st.codes()[b0 + i];
          ++total_codes;
          sq += stored * stored;
        }
      }
      ASSERT_NEAR(pl.stats.error_sq_norm, sq, 1e-9 * sq);
    }
    // Codes differ from the double re-quantization only where e/scale8 sits
    // within fp32 rounding of a half-integer.
    EXPECT_GE(same_codes, total_codes * 99 / 100);
  }
}

TEST(LocoCompressTest, NaiveLeavesStateUntouchedAndEqualsQuantize) {
  const size_t n = 2 * 128 + 30;
  std::vector<float> g = RandomVector(n, 77);
  g[17] = std::numeric_limits<float>::quiet_NaN();
  for (int bits : {2, 4, 8}) {
    LocoParams p;
    p.mode = CompensationMode::kNaive;
    p.bits = bits;
    ErrorState st(n, p.block_size, 8);
    for (size_t i = 0; i < n; ++i) st.mutable_codes()[i] = static_cast<int8_t>(i % 200 - 100);
    for (float& s : st.mutable_scales()) s = 0.25f;
    const std::vector<int8_t> codes_before = st.codes();
    const Payload pl = Compress(g, 9, p, st);
    EXPECT_EQ(st.codes(), codes_before);
    for (float s : st.scales()) EXPECT_EQ(s, 0.25f);

    QuantizeParams qp;
    qp.bits = bits;
    std::vector<uint8_t> qcodes(PackedBytes(n, bits));
    std::vector<float> qscales(NumBlocks(n, 128));
    QuantizeStats qs;
    ASSERT_TRUE(cpu::Quantize(g.data(), n, qp, qcodes.data(), qscales.data(), &qs).ok());
    EXPECT_EQ(pl.codes, qcodes);
    EXPECT_EQ(pl.scales, qscales);
    EXPECT_EQ(pl.stats.nonfinite, qs.nonfinite);
    EXPECT_EQ(pl.stats.nonfinite, 1u);

    // An empty state is fine for kNaive.
    std::vector<uint8_t> c2(qcodes.size());
    std::vector<float> s2(qscales.size());
    ASSERT_TRUE(cpu::LocoCompress(g.data(), n, 0, p, ErrorStateView{}, c2.data(), s2.data(), nullptr).ok());
    EXPECT_EQ(c2, qcodes);
  }
}

TEST(LocoCompressTest, NonFiniteGradientsAreCountedAndZeroTheirError) {
  const size_t n = 256;
  for (int error_bits : {8, 32}) {
    LocoParams p;
    p.error_bits = error_bits;
    ErrorState st(n, p.block_size, error_bits);
    (void)Compress(RandomVector(n, 1), 0, p, st);  // a non-zero error state
    std::vector<float> g = RandomVector(n, 2);
    g[10] = std::numeric_limits<float>::infinity();
    g[11] = std::numeric_limits<float>::quiet_NaN();
    g[200] = -std::numeric_limits<float>::infinity();
    const Payload pl = Compress(g, 1, p, st);
    EXPECT_EQ(pl.stats.nonfinite, 3u);
    for (float s : pl.scales) EXPECT_TRUE(std::isfinite(s));
    const std::vector<int> codes = UnpackRef(pl.codes.data(), n, p.bits);
    const std::vector<double> e = StoredError(st, p.block_size);
    for (size_t i : {10u, 11u, 200u}) {
      EXPECT_EQ(codes[i], 0);
      EXPECT_EQ(e[i], 0.0);
    }
    for (double v : e) EXPECT_TRUE(std::isfinite(v));
  }
}

// The gradient's squared norm comes with the compression pass: Σ g² over
// the finite g, against an fp64 sum, in every mode, with a partial last
// block, non-finite elements and squares too large for a float.
TEST(LocoCompressTest, GradientNormIsTheFiniteSquaredNormWithinAMetricsTolerance) {
  const size_t n = 3 * 256 + 77;
  std::vector<float> g = RandomVector(n, 5);
  for (size_t i = 0; i < n; i += 97) g[i] *= 1000.0f;  // some large entries
  auto finite_sq = [](const std::vector<float>& v) {
    double sq = 0;
    for (float x : v) {
      if (std::isfinite(x)) sq += static_cast<double>(x) * x;
    }
    return sq;
  };
  std::vector<float> bad = g;
  bad[3] = std::numeric_limits<float>::quiet_NaN();
  bad[300] = std::numeric_limits<float>::infinity();
  bad[n - 1] = -std::numeric_limits<float>::infinity();  // in the partial block
  std::vector<float> huge = g;
  huge[520] = 3e20f;  // finite, but its square is not a float
  huge[n - 2] = -2e19f;
  for (CompensationMode mode :
       {CompensationMode::kNaive, CompensationMode::kEf, CompensationMode::kLoco}) {
    for (int error_bits : {8, 32}) {
      LocoParams p;
      p.mode = mode;
      p.error_bits = error_bits;
      p.block_size = 256;
      for (const std::vector<float>* v : {&g, &bad, &huge}) {
        ErrorState st(n, p.block_size, error_bits);
        (void)Compress(RandomVector(n, 6), 0, p, st);  // a non-zero error state
        const Payload pl = Compress(*v, 1, p, st);
        const double want = finite_sq(*v);
        EXPECT_TRUE(std::isfinite(pl.stats.grad_sq_norm));
        EXPECT_NEAR(pl.stats.grad_sq_norm, want, 1e-5 * want)
            << "mode " << static_cast<int>(mode) << " error_bits " << error_bits;
      }
    }
  }
}

TEST(LocoCompressTest, StateCostsOneBytePerElementPlusScalesAndFitsExactly) {
  for (size_t n : {size_t{1}, size_t{127}, size_t{128}, size_t{1000}, size_t{4097}}) {
    for (int block : {32, 128, 4096}) {
      const size_t blocks = NumBlocks(n, block);
      EXPECT_EQ(ErrorState(n, block).bytes(), n + 4 * blocks);
      EXPECT_EQ(ErrorState(n, block, 32).bytes(), 4 * n);

      // Run on buffers of exactly those sizes followed by guard bytes.
      constexpr size_t kGuard = 32;
      std::vector<int8_t> codes(n + kGuard, 0);
      std::vector<float> scales(blocks + kGuard, 0.0f);
      for (size_t i = n; i < codes.size(); ++i) codes[i] = 0x55;
      for (size_t i = blocks; i < scales.size(); ++i) scales[i] = 9.0f;
      std::vector<uint8_t> pcodes(PackedBytes(n, 4) + kGuard, 0xEE);
      std::vector<float> pscales(blocks + kGuard, 8.0f);
      LocoParams p;
      p.block_size = block;
      const ErrorStateView view{codes.data(), scales.data(), nullptr};
      for (int64_t t = 0; t < 3; ++t) {
        const std::vector<float> g = RandomVector(n, static_cast<uint32_t>(t));
        ASSERT_TRUE(cpu::LocoCompress(g.data(), n, t, p, view, pcodes.data(), pscales.data(), nullptr).ok());
      }
      for (size_t i = n; i < codes.size(); ++i) ASSERT_EQ(codes[i], 0x55);
      for (size_t i = blocks; i < scales.size(); ++i) ASSERT_EQ(scales[i], 9.0f);
      for (size_t i = PackedBytes(n, 4); i < pcodes.size(); ++i) ASSERT_EQ(pcodes[i], 0xEE);
      for (size_t i = blocks; i < pscales.size(); ++i) ASSERT_EQ(pscales[i], 8.0f);
      bool any_error = false;
      for (size_t i = 0; i < n; ++i) any_error |= codes[i] != 0;
      EXPECT_TRUE(any_error || n == 1);  // the state is in use
    }
  }
}

TEST(LocoCompressTest, InvalidCallsAreRejectedAndWriteNothing) {
  const size_t n = 300;
  const std::vector<float> g = RandomVector(n, 4);
  ErrorState st(n, 128, 8);
  for (size_t i = 0; i < n; ++i) st.mutable_codes()[i] = 3;
  std::vector<uint8_t> codes(PackedBytes(n, 8), 0x11);
  std::vector<float> scales(NumBlocks(n, 32), 2.0f);
  auto expect_rejected = [&](const LocoParams& p, int64_t step, ErrorStateView view,
                             const std::string& fragment) {
    LocoStats stats{17, 1.5};
    const Status s = cpu::LocoCompress(g.data(), n, step, p, view, codes.data(), scales.data(), &stats);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << fragment;
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
    for (uint8_t c : codes) ASSERT_EQ(c, 0x11);
    for (float v : scales) ASSERT_EQ(v, 2.0f);
    for (int8_t c : st.codes()) ASSERT_EQ(c, 3);
    EXPECT_EQ(stats.nonfinite, 17u);
  };
  LocoParams p;
  p.beta = 1.5f;
  expect_rejected(p, 0, st.view(), "beta 1.5 is not in [0, 1]");
  p.beta = std::numeric_limits<float>::quiet_NaN();
  expect_rejected(p, 0, st.view(), "is not in [0, 1]");
  p = LocoParams();
  p.reset_period = -1;
  expect_rejected(p, 0, st.view(), "reset_period -1 is negative");
  p = LocoParams();
  p.error_bits = 16;
  expect_rejected(p, 0, st.view(), "error_bits 16 is not supported");
  p = LocoParams();
  p.bits = 3;
  expect_rejected(p, 0, st.view(), "bits 3 is not supported");
  p = LocoParams();
  p.block_size = 100;
  expect_rejected(p, 0, st.view(), "block_size 100 is not a multiple of 32 in [32, 4096]");
  p = LocoParams();
  p.index_offset = 64;
  expect_rejected(p, 0, st.view(), "index_offset 64 is not a multiple of block_size 128");
  p = LocoParams();
  p.mode = static_cast<CompensationMode>(9);
  expect_rejected(p, 0, st.view(), "compensation mode 9 is unknown");
  expect_rejected(LocoParams(), -1, st.view(), "step -1 is negative");
  p = LocoParams();
  p.mode = CompensationMode::kEf;
  expect_rejected(p, 0, ErrorStateView{}, "needs non-null codes and scales");
  p.error_bits = 32;
  expect_rejected(p, 0, st.view(), "needs non-null values");
}

}  // namespace
}  // namespace loco

// The AVX-512 path of cpu::LocoCompress against the portable one, bit for
// bit, over the cases where they could part: every block size class, a
// partial last block of every length class, 2/4/8 bits, both compensating
// modes, error resets, non-finite, zero, subnormal and near-overflow
// values. (loco_compress_test.cc checks whichever path this CPU takes
// against the scalar reference of the specification.)
#include "kernels/loco_compress_avx512.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/call_checks.h"
#include "tests/common/same_bits.h"
#include "tests/kernels/hard_gradient.h"
#include "tests/kernels/spec_reference.h"

namespace loco {
namespace {

struct PathOutput {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  LocoStats stats;
};

// One step of one path on its own state.
PathOutput Step(bool avx512, const std::vector<float>& g, bool reset, const LocoParams& p,
         ErrorState& st) {
  PathOutput r;
  r.codes.assign(PackedBytes(g.size(), p.bits), 0xAB);
  r.scales.assign(NumBlocks(g.size(), p.block_size), -1.0f);
  r.stats = LocoStats{99, -1.0, -1.0};
  (avx512 ? cpu::detail::LocoCompressAvx512 : cpu::detail::LocoCompressPortable)(
      g.data(), g.size(), reset, p, st.view(), r.codes.data(), r.scales.data(), &r.stats);
  return r;
}

TEST(LocoCompressAvx512Test, MatchesThePortablePathBitForBit) {
  if (!cpu::detail::HaveAvx512()) GTEST_SKIP() << "this CPU has no AVX-512";
  int cases = 0;
  for (int block : {32, 64, 128, 256, 4096}) {
    for (int bits : {2, 4, 8}) {
      for (CompensationMode mode : {CompensationMode::kEf, CompensationMode::kLoco}) {
        for (size_t tail : {size_t{0}, size_t{1}, size_t{7}, size_t{15}, size_t{16}, size_t{17},
                            size_t{31}, static_cast<size_t>(block - 1)}) {
          const size_t n = 2 * static_cast<size_t>(block) + tail;
          LocoParams p;
          p.mode = mode;
          p.bits = bits;
          p.block_size = block;
          p.beta = 0.3f;
          p.reset_period = 5;
          ASSERT_TRUE(cpu::detail::Avx512Handles(p));
          ErrorState fast(n, block), portable(n, block);
          for (int64_t t = 0; t < 7; ++t) {
            SCOPED_TRACE(::testing::Message() << "block " << block << " bits " << bits << " mode "
                                              << static_cast<int>(mode) << " n " << n
                                              << " step " << t);
            const std::vector<float> g = HardGradient(n, static_cast<size_t>(block), t,
                                                  static_cast<uint32_t>(block + bits + tail));
            const bool reset = mode == CompensationMode::kLoco && (t + 1) % p.reset_period == 0;
            const PathOutput a = Step(true, g, reset, p, fast);
            const PathOutput b = Step(false, g, reset, p, portable);
            ASSERT_EQ(a.codes, b.codes);
            ASSERT_TRUE(SameBits(a.scales, b.scales));
            ASSERT_EQ(fast.codes(), portable.codes());
            ASSERT_TRUE(SameBits(fast.scales(), portable.scales()));
            ASSERT_EQ(a.stats.nonfinite, b.stats.nonfinite);
            ASSERT_EQ(a.stats.error_sq_norm, b.stats.error_sq_norm);
            // A metric, summed in another lane order (see the header).
            ASSERT_NEAR(a.stats.grad_sq_norm, b.stats.grad_sq_norm, 1e-5 * b.stats.grad_sq_norm);
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 5 * 3 * 2 * 8 * 7);
}

// The choice cpu::LocoCompress makes: the cases the AVX-512 path leaves to
// the portable one, and the same result either way through the public call.
TEST(LocoCompressAvx512Test, HandlesOnlyCompensatingInt8NearestCases) {
  LocoParams p;
  EXPECT_TRUE(cpu::detail::Avx512Handles(p));
  p.mode = CompensationMode::kNaive;
  EXPECT_FALSE(cpu::detail::Avx512Handles(p));
  p = LocoParams();
  p.error_bits = 32;
  EXPECT_FALSE(cpu::detail::Avx512Handles(p));
  p = LocoParams();
  p.rounding = Rounding::kStochastic;
  EXPECT_FALSE(cpu::detail::Avx512Handles(p));

  const size_t n = 1000;
  const std::vector<float> g = testing_ref::RandomVector(n, 11);
  LocoParams q;
  ErrorState via_public(n, q.block_size), via_portable(n, q.block_size);
  std::vector<uint8_t> c1(PackedBytes(n, q.bits)), c2(c1.size());
  std::vector<float> s1(NumBlocks(n, q.block_size)), s2(s1.size());
  for (int64_t t = 0; t < 3; ++t) {
    ASSERT_TRUE(cpu::LocoCompress(g.data(), n, t, q, via_public.view(), c1.data(), s1.data(),
                                  nullptr).ok());
    cpu::detail::LocoCompressPortable(g.data(), n, false, q, via_portable.view(), c2.data(),
                                      s2.data(), nullptr);
    ASSERT_EQ(c1, c2);
    ASSERT_TRUE(SameBits(s1, s2));
    ASSERT_EQ(via_public.codes(), via_portable.codes());
  }
}

}  // namespace
}  // namespace loco

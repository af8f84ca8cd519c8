#include "kernels/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tests/common/same_bits.h"
#include "tests/kernels/spec_reference.h"

namespace loco {
namespace {

using testing_ref::PackRef;
using testing_ref::QuantizeRef;
using testing_ref::RandomVector;
using testing_ref::UnpackRef;

constexpr float kDenormMin = std::numeric_limits<float>::denorm_min();

struct Encoded {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  QuantizeStats stats;
};

// Runs cpu::Quantize into buffers with a guard region after each, and checks
// that the guard is untouched (nothing written past the documented sizes).
Encoded Encode(const std::vector<float>& x, const QuantizeParams& p) {
  constexpr size_t kGuard = 16;
  const size_t nbytes = PackedBytes(x.size(), p.bits);
  const size_t nblocks = NumBlocks(x.size(), p.block_size);
  std::vector<uint8_t> codes(nbytes + kGuard, 0xA5);
  std::vector<float> scales(nblocks + kGuard, -7.0f);
  Encoded e;
  const Status st = cpu::Quantize(x.data(), x.size(), p, codes.data(), scales.data(), &e.stats);
  EXPECT_TRUE(st.ok()) << st.ToString();
  for (size_t i = nbytes; i < codes.size(); ++i) EXPECT_EQ(codes[i], 0xA5) << "byte " << i;
  for (size_t i = nblocks; i < scales.size(); ++i) EXPECT_EQ(scales[i], -7.0f) << "scale " << i;
  codes.resize(nbytes);
  scales.resize(nblocks);
  e.codes = std::move(codes);
  e.scales = std::move(scales);
  return e;
}

// Compares the kernel's output with the scalar reference bit for bit, and
// checks the decode-error bound |x - D(Q(x))| <= scale/2 (nearest rounding)
// plus 1e-6 relative slack and one denormal step for the fp32 roundings, plus
// the cost of multiplying by inv = qmax/absmax instead of dividing by the
// scale: y = x * inv differs from x / scale by three roundings (scale, inv,
// product) of a value <= qmax, at most 3 * 2^-24 * qmax * (1 + 2^-23) code
// units, and where the scale is denormal its rounding adds up to qmax * 2^-150
// in x. Slack: qmax * (2^-22 * scale + 2^-149), which covers both with room.
void CheckAgainstReference(const std::vector<float>& x, const QuantizeParams& p) {
  SCOPED_TRACE("n=" + std::to_string(x.size()) + " bits=" + std::to_string(p.bits) +
               " block=" + std::to_string(p.block_size));
  const Encoded got = Encode(x, p);
  const testing_ref::Quantized want = QuantizeRef(x.data(), x.size(), p);
  ASSERT_EQ(got.scales.size(), want.scales.size());
  for (size_t b = 0; b < want.scales.size(); ++b) {
    ASSERT_TRUE(SameBits(got.scales[b], want.scales[b]))
        << "block " << b << ": " << got.scales[b] << " vs " << want.scales[b];
  }
  ASSERT_EQ(got.codes, PackRef(want.codes, p.bits));
  EXPECT_EQ(got.stats.nonfinite, want.nonfinite);

  std::vector<float> decoded(x.size(), -1.0f);
  ASSERT_TRUE(cpu::Dequantize(got.codes.data(), got.scales.data(), x.size(), p.bits,
                              p.block_size, decoded.data())
                  .ok());
  const std::vector<int> codes = UnpackRef(got.codes.data(), x.size(), p.bits);
  for (size_t i = 0; i < x.size(); ++i) {
    const float s = got.scales[i / static_cast<size_t>(p.block_size)];
    ASSERT_TRUE(SameBits(decoded[i], static_cast<float>(codes[i]) * s)) << "element " << i;
    if (p.rounding == Rounding::kNearest && std::isfinite(x[i])) {
      const double err = std::fabs(static_cast<double>(x[i]) - decoded[i]);
      const double qmax = QMax(p.bits);
      const double reciprocal_slack = qmax * (std::ldexp(s, -22) + std::ldexp(1.0, -149));
      ASSERT_LE(err, 0.5 * s + 1e-6 * std::fabs(x[i]) + kDenormMin + reciprocal_slack)
          << "element " << i << " x=" << x[i] << " decoded=" << decoded[i] << " scale=" << s;
    }
  }
}

TEST(QuantizeTest, EverySizeUpToThreeBlocksPlusFive) {
  for (int block : {32, 128}) {
    for (int bits : {2, 4, 8}) {
      for (size_t n = 1; n <= static_cast<size_t>(3 * block + 5); ++n) {
        QuantizeParams p;
        p.bits = bits;
        p.block_size = block;
        CheckAgainstReference(RandomVector(n, static_cast<uint32_t>(n * 7 + bits)), p);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(QuantizeTest, LargeBlocksAndLongVectors) {
  for (int block : {96, 1024, 4096}) {
    for (int bits : {2, 4, 8}) {
      QuantizeParams p;
      p.bits = bits;
      p.block_size = block;
      CheckAgainstReference(RandomVector(3 * 4096 + 77, 11), p);
    }
  }
}

TEST(QuantizeTest, ZeroBlocksHaveScaleZeroAndDecodeToZero) {
  std::vector<float> x = RandomVector(3 * 128, 3);
  for (size_t i = 128; i < 256; ++i) x[i] = (i % 2) ? 0.0f : -0.0f;
  for (int bits : {2, 4, 8}) {
    QuantizeParams p;
    p.bits = bits;
    const Encoded e = Encode(x, p);
    EXPECT_TRUE(SameBits(e.scales[1], 0.0f));
    const std::vector<int> codes = UnpackRef(e.codes.data(), x.size(), bits);
    for (size_t i = 128; i < 256; ++i) EXPECT_EQ(codes[i], 0);
    std::vector<float> d(x.size());
    ASSERT_TRUE(cpu::Dequantize(e.codes.data(), e.scales.data(), x.size(), bits, 128, d.data()).ok());
    for (size_t i = 128; i < 256; ++i) EXPECT_EQ(d[i], 0.0f);
    CheckAgainstReference(x, p);
  }
}

TEST(QuantizeTest, TailBlockLeavesUnusedBitsZero) {
  // 2*128 + 7 elements: the tail block holds 7 codes; 4-bit leaves the high
  // nibble of the last byte unused and 2-bit the top two bits.
  const std::vector<float> x = RandomVector(2 * 128 + 7, 5);
  for (int bits : {2, 4}) {
    QuantizeParams p;
    p.bits = bits;
    const Encoded e = Encode(x, p);
    ASSERT_EQ(e.scales.size(), 3u);
    const int used = (7 * bits) % 8;
    EXPECT_EQ(e.codes.back() >> used, 0) << "bits " << bits;
    // The tail scale covers only the 7 tail elements.
    EXPECT_TRUE(SameBits(e.scales[2], testing_ref::ScaleRef(x.data() + 256, 7, QMax(bits))));
    CheckAgainstReference(x, p);
  }
}

TEST(QuantizeTest, ExtremeMagnitudes) {
  std::vector<float> x(6 * 32, 0.0f);
  for (size_t i = 0; i < 32; ++i) x[i] = (i % 3 == 0 ? -1.0f : 1.0f) * 1e30f * (1.0f + i);
  for (size_t i = 32; i < 64; ++i) x[i] = (i % 2 ? -1e-40f : 1e-40f) * static_cast<float>(i - 31);
  x[64] = kDenormMin;  // rest of block 2 is zero: absmax/qmax underflows
  x[96] = -kDenormMin * 3;
  for (size_t i = 128; i < 160; ++i) x[i] = 3.0e38f * (i % 2 ? 1.0f : -0.25f);  // near FLT_MAX
  x[160] = std::numeric_limits<float>::min();  // smallest normal
  x[161] = -1e-45f;
  for (int bits : {2, 4, 8}) {
    QuantizeParams p;
    p.bits = bits;
    p.block_size = 32;
    CheckAgainstReference(x, p);
    const Encoded e = Encode(x, p);
    // denorm_min / qmax rounds to 0, so the scale falls back to denorm_min
    // and the element is code 1: it decodes exactly.
    EXPECT_TRUE(SameBits(e.scales[2], kDenormMin));
    EXPECT_EQ(UnpackRef(e.codes.data(), x.size(), bits)[64], 1);
    for (float s : e.scales) EXPECT_TRUE(std::isfinite(s));
  }
}

TEST(QuantizeTest, NonFiniteInputsAreCountedAndEncodedAsZero) {
  std::vector<float> x = RandomVector(256, 9);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[40] = std::numeric_limits<float>::infinity();
  x[41] = -std::numeric_limits<float>::infinity();
  x[200] = std::numeric_limits<float>::signaling_NaN();
  for (int bits : {2, 4, 8}) {
    QuantizeParams p;
    p.bits = bits;
    p.block_size = 32;
    const Encoded e = Encode(x, p);
    EXPECT_EQ(e.stats.nonfinite, 4u);
    for (float s : e.scales) EXPECT_TRUE(std::isfinite(s) && s >= 0.0f);
    const std::vector<int> codes = UnpackRef(e.codes.data(), x.size(), bits);
    for (size_t i : {3u, 40u, 41u, 200u}) EXPECT_EQ(codes[i], 0) << i;
    // The scale of block 1 is what it would be with the Infs replaced by 0.
    std::vector<float> clean(x.begin() + 32, x.begin() + 64);
    clean[8] = clean[9] = 0.0f;
    EXPECT_TRUE(SameBits(e.scales[1], testing_ref::ScaleRef(clean.data(), 32, QMax(bits))));
    CheckAgainstReference(x, p);
  }
  // An all-non-finite block is a zero block.
  std::vector<float> bad(32, std::numeric_limits<float>::infinity());
  QuantizeParams p;
  p.block_size = 32;
  const Encoded e = Encode(bad, p);
  EXPECT_EQ(e.stats.nonfinite, 32u);
  EXPECT_TRUE(SameBits(e.scales[0], 0.0f));
}

TEST(QuantizeTest, StochasticUniformIsSplitMix64AndInUnitInterval) {
  double sum = 0;
  const int kCount = 100000;
  for (int i = 0; i < kCount; ++i) {
    const float u = StochasticUniform(42, static_cast<uint64_t>(i));
    ASSERT_EQ(u, testing_ref::UniformRef(42, static_cast<uint64_t>(i))) << i;
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  // Mean of U[0,1): sd of the mean is sqrt(1/12/kCount) ~ 9.1e-4; allow 5 sd.
  EXPECT_NEAR(sum / kCount, 0.5, 5 * std::sqrt(1.0 / 12 / kCount));
  EXPECT_NE(StochasticUniform(1, 7), StochasticUniform(2, 7));
}

TEST(QuantizeTest, StochasticMatchesReferenceAndIsDeterministic) {
  const std::vector<float> x = RandomVector(1000, 13);
  for (int bits : {2, 4, 8}) {
    QuantizeParams p;
    p.bits = bits;
    p.block_size = 64;
    p.rounding = Rounding::kStochastic;
    p.seed = 1234;
    p.index_offset = 640;
    CheckAgainstReference(x, p);
    const Encoded a = Encode(x, p);
    const Encoded b = Encode(x, p);
    EXPECT_EQ(a.codes, b.codes);
    p.seed = 1235;
    const Encoded c = Encode(x, p);
    EXPECT_NE(a.codes, c.codes);
    EXPECT_EQ(a.scales, c.scales);  // scales never depend on the rounding draw
  }
}

TEST(QuantizeTest, StochasticRoundingIsUnbiased) {
  // For a fixed block the scale s is fixed and E[floor(y + u)] = y, so the
  // mean decoded value over K seeds estimates x with a standard deviation of
  // at most s / (2 sqrt(K)) per element. Checked at 5 sd per element and on
  // the average signed error over all elements.
  const std::vector<float> x = RandomVector(256, 17);
  const int kSeeds = 2000;
  for (int bits : {2, 4}) {
    QuantizeParams p;
    p.bits = bits;
    p.block_size = 128;
    p.rounding = Rounding::kStochastic;
    std::vector<double> mean(x.size(), 0.0);
    std::vector<float> scales;
    for (int k = 0; k < kSeeds; ++k) {
      p.seed = static_cast<uint64_t>(k) * 7919 + 1;
      const Encoded e = Encode(x, p);
      std::vector<float> d(x.size());
      ASSERT_TRUE(cpu::Dequantize(e.codes.data(), e.scales.data(), x.size(), bits, 128, d.data()).ok());
      for (size_t i = 0; i < x.size(); ++i) mean[i] += d[i] / static_cast<double>(kSeeds);
      scales = e.scales;
    }
    double signed_sum = 0, s_sum = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double s = scales[i / 128];
      EXPECT_NEAR(mean[i], x[i], 5 * s / (2 * std::sqrt(kSeeds)) + 1e-6 * std::fabs(x[i]))
          << "element " << i << " bits " << bits;
      signed_sum += (mean[i] - x[i]) / s;
      s_sum += 1;
    }
    EXPECT_NEAR(signed_sum / s_sum, 0.0, 5 / (2 * std::sqrt(kSeeds * s_sum)));
  }
}

TEST(QuantizeTest, SlicesWithIndexOffsetEqualTheWholeVector) {
  const size_t block = 64;
  const std::vector<float> x = RandomVector(5 * block + 19, 21);
  for (int bits : {2, 4, 8}) {
    for (Rounding r : {Rounding::kNearest, Rounding::kStochastic}) {
      QuantizeParams p;
      p.bits = bits;
      p.block_size = static_cast<int>(block);
      p.rounding = r;
      p.seed = 99;
      p.index_offset = 10 * block;  // the whole vector itself starts mid-tensor
      const Encoded whole = Encode(x, p);
      std::vector<uint8_t> codes;
      std::vector<float> scales;
      for (size_t start : {size_t{0}, 2 * block, 3 * block}) {
        const size_t end = start == 3 * block ? x.size() : (start == 0 ? 2 * block : 3 * block);
        QuantizeParams ps = p;
        ps.index_offset = p.index_offset + start;
        const Encoded part = Encode(std::vector<float>(x.begin() + start, x.begin() + end), ps);
        codes.insert(codes.end(), part.codes.begin(), part.codes.end());
        scales.insert(scales.end(), part.scales.begin(), part.scales.end());
      }
      EXPECT_EQ(codes, whole.codes) << "bits " << bits;
      EXPECT_EQ(scales, whole.scales);
    }
  }
}

// DequantizeAdd is the worker's and the server's W += D(payload): it must
// equal Dequantize into a buffer followed by a separate add, bit for bit
// (the decoded value rounded to fp32 before the add), or a worker's copy
// would drift from the server's replica.
TEST(QuantizeTest, DequantizeAddIsDequantizeThenAddBitForBit) {
  for (int bits : {2, 4, 8}) {
    for (int block : {32, 96, 128, 4096}) {
      const size_t b = static_cast<size_t>(block);
      for (size_t n : {size_t{1}, size_t{31}, b, b * 3 + 17, size_t{20000}}) {
        SCOPED_TRACE("bits " + std::to_string(bits) + " block " + std::to_string(block) +
                     " n " + std::to_string(n));
        QuantizeParams p;
        p.bits = bits;
        p.block_size = block;
        // Deltas far smaller than the base values, so that the add rounds.
        std::vector<float> delta = RandomVector(n, 40 + static_cast<uint32_t>(bits));
        for (float& d : delta) d *= 1e-3f;
        const Encoded e = Encode(delta, p);
        std::vector<float> base = RandomVector(n, 7);
        for (size_t i = 0; i < n; ++i) base[i] = base[i] * 3.0f + (i % 5 == 0 ? 1e4f : 0.5f);
        std::vector<float> decoded(n);
        ASSERT_TRUE(cpu::Dequantize(e.codes.data(), e.scales.data(), n, bits, block,
                                    decoded.data()).ok());
        std::vector<float> want = base;
        for (size_t i = 0; i < n; ++i) want[i] += decoded[i];
        std::vector<float> got = base;
        got.push_back(-9.0f);  // guard
        ASSERT_TRUE(cpu::DequantizeAdd(e.codes.data(), e.scales.data(), n, bits, block,
                                       got.data()).ok());
        EXPECT_EQ(got.back(), -9.0f) << "wrote past n";
        got.pop_back();
        size_t rounded = 0;
        for (size_t i = 0; i < n; ++i) {
          ASSERT_TRUE(SameBits(got[i], want[i])) << "element " << i << ": " << got[i] << " vs "
                                                 << want[i];
          rounded += static_cast<double>(got[i]) !=
                     static_cast<double>(base[i]) + static_cast<double>(decoded[i]);
        }
        // The case exercises rounding (a fused multiply-add would differ).
        if (n >= 1000) {
          EXPECT_GT(rounded, n / 100);
        }
      }
    }
  }
}

TEST(QuantizeTest, InvalidParametersAreRejectedAndNothingIsWritten) {
  const std::vector<float> x = RandomVector(256, 1);
  std::vector<uint8_t> codes(512, 0x5A);
  std::vector<float> scales(64, 3.0f);
  auto expect_rejected = [&](const QuantizeParams& p, const std::string& fragment) {
    const Status st = cpu::Quantize(x.data(), x.size(), p, codes.data(), scales.data(), nullptr);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << fragment;
    EXPECT_NE(st.message().find(fragment), std::string::npos) << st.message();
    for (uint8_t c : codes) ASSERT_EQ(c, 0x5A);
    for (float s : scales) ASSERT_EQ(s, 3.0f);
  };
  for (int bits : {0, 1, 3, 5, 16}) {
    QuantizeParams p;
    p.bits = bits;
    expect_rejected(p, "bits " + std::to_string(bits) + " is not supported");
  }
  for (int block : {0, 16, -32, 100, 4128, 8192}) {
    QuantizeParams p;
    p.block_size = block;
    expect_rejected(p, "block_size " + std::to_string(block) + " is not a multiple of 32 in [32, 4096]");
  }
  QuantizeParams p;
  p.index_offset = 5;
  expect_rejected(p, "index_offset 5 is not a multiple of block_size 128");
  p = QuantizeParams();
  p.rounding = static_cast<Rounding>(7);
  expect_rejected(p, "rounding 7 is unknown");
  EXPECT_FALSE(cpu::Quantize(nullptr, 10, QuantizeParams(), codes.data(), scales.data(), nullptr).ok());
  EXPECT_FALSE(cpu::Quantize(x.data(), 10, QuantizeParams(), nullptr, scales.data(), nullptr).ok());
  EXPECT_TRUE(cpu::Quantize(nullptr, 0, QuantizeParams(), nullptr, nullptr, nullptr).ok());

  std::vector<float> out(256, 1.0f);
  const Status st = cpu::Dequantize(codes.data(), scales.data(), 256, 4, 100, out.data());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("block_size 100"), std::string::npos);
  for (float v : out) ASSERT_EQ(v, 1.0f);
  EXPECT_FALSE(cpu::Dequantize(codes.data(), scales.data(), 256, 6, 128, out.data()).ok());
  const Status add = cpu::DequantizeAdd(codes.data(), scales.data(), 256, 2, 4128, out.data());
  EXPECT_EQ(add.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(add.message().find("block_size 4128"), std::string::npos) << add.message();
  EXPECT_FALSE(cpu::DequantizeAdd(codes.data(), scales.data(), 256, 3, 128, out.data()).ok());
  EXPECT_FALSE(cpu::DequantizeAdd(nullptr, scales.data(), 256, 4, 128, out.data()).ok());
  for (float v : out) ASSERT_EQ(v, 1.0f);
  EXPECT_TRUE(cpu::DequantizeAdd(nullptr, nullptr, 0, 4, 128, nullptr).ok());
}

TEST(QuantizeTest, ValidateQuantizeParamsAcceptsEveryValidCombination) {
  for (int bits : {2, 4, 8}) {
    for (int block = 32; block <= 4096; block += 32) {
      EXPECT_TRUE(ValidateQuantizeParams(bits, block).ok()) << bits << " " << block;
    }
  }
}

}  // namespace
}  // namespace loco

// Block quantizer: CUDA against the CPU reference, bit for bit (codes, scales,
// non-finite counts, decoded values). Also checks, on the host and so without
// a GPU, that the element arithmetic the kernels are built from
// (kernels/quant_math.h) reproduces the CPU reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "device_buffer.h"
#include "kernels/cast.h"
#include "kernels/device.h"
#include "kernels/quant_math.h"
#include "kernels/quantize.h"
#include "parity_inputs.h"

namespace loco {
namespace {

using testing::DeviceBuffer;
using testing::FloatBits;
using testing::QuantizerInput;

struct QuantizeCase {
  int bits;
  int block;
  size_t n;
};

std::vector<QuantizeCase> QuantizeCases() {
  std::vector<QuantizeCase> cases;
  for (int bits : {2, 4, 8}) {
    for (int block : {32, 128, 96, 4096}) {
      // Tails: a single element, a partial block, exact blocks, odd sizes.
      const size_t b = static_cast<size_t>(block);
      for (size_t n : {size_t{1}, size_t{31}, size_t{33}, b * 8, b * 8 + 5, size_t{100003}}) {
        cases.push_back({bits, block, n});
      }
    }
  }
  return cases;
}

// Runs cpu:: and cuda:: Quantize on the same input and compares everything.
// `x_offset` shifts the device input by that many floats (unaligned loads).
void ExpectQuantizeParity(const std::vector<float>& x, const QuantizeParams& p, size_t x_offset) {
  const size_t n = x.size();
  std::vector<uint8_t> codes(PackedBytes(n, p.bits));
  std::vector<float> scales(NumBlocks(n, p.block_size));
  QuantizeStats stats;
  ASSERT_TRUE(cpu::Quantize(x.data(), n, p, codes.data(), scales.data(), &stats).ok());

  DeviceBuffer<float> dx(n + x_offset);
  dx.Upload(x, x_offset);
  DeviceBuffer<uint8_t> dcodes(codes.size());
  DeviceBuffer<float> dscales(scales.size());
  ASSERT_TRUE(dx.ok() && dcodes.ok() && dscales.ok());
  QuantizeStats dstats;
  dstats.nonfinite = 12345;  // must be overwritten
  const Status s =
      cuda::Quantize(dx.data() + x_offset, n, p, dcodes.data(), dscales.data(), &dstats, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(dcodes.Download(), codes);
  EXPECT_EQ(FloatBits(dscales.Download()), FloatBits(scales));
  EXPECT_EQ(dstats.nonfinite, stats.nonfinite);

  // Dequantize of the same codes: bit-identical decodings.
  std::vector<float> out(n);
  ASSERT_TRUE(cpu::Dequantize(codes.data(), scales.data(), n, p.bits, p.block_size, out.data()).ok());
  DeviceBuffer<float> dout(n);
  ASSERT_TRUE(cuda::Dequantize(dcodes.data(), dscales.data(), n, p.bits, p.block_size, dout.data(), nullptr).ok());
  EXPECT_EQ(FloatBits(dout.Download()), FloatBits(out));

  // DequantizeAdd onto the same base values: bit-identical sums.
  std::vector<float> base(n);
  for (size_t i = 0; i < n; ++i) base[i] = 0.75f + static_cast<float>(i % 13) * 1024.5f;
  std::vector<float> sum = base;
  ASSERT_TRUE(cpu::DequantizeAdd(codes.data(), scales.data(), n, p.bits, p.block_size, sum.data()).ok());
  DeviceBuffer<float> dsum(n);
  dsum.Upload(base, 0);
  ASSERT_TRUE(cuda::DequantizeAdd(dcodes.data(), dscales.data(), n, p.bits, p.block_size, dsum.data(), nullptr).ok());
  EXPECT_EQ(FloatBits(dsum.Download()), FloatBits(sum));
}

TEST(CudaQuantizeParity, NearestBitIdentical) {
  LOCO_REQUIRE_CUDA_DEVICE();
  for (const QuantizeCase& c : QuantizeCases()) {
    SCOPED_TRACE("bits " + std::to_string(c.bits) + " block " + std::to_string(c.block) + " n " +
                 std::to_string(c.n));
    QuantizeParams p;
    p.bits = c.bits;
    p.block_size = c.block;
    ExpectQuantizeParity(QuantizerInput(c.n, c.block, c.bits, 7 + c.bits, true), p, 0);
  }
}

TEST(CudaQuantizeParity, UnalignedInputBitIdentical) {
  LOCO_REQUIRE_CUDA_DEVICE();
  for (int bits : {2, 4, 8}) {
    QuantizeParams p;
    p.bits = bits;
    p.block_size = 128;
    ExpectQuantizeParity(QuantizerInput(128 * 20 + 3, 128, bits, 99, true), p, 1);
  }
}

TEST(CudaQuantizeParity, StochasticBitIdenticalForFixedSeed) {
  LOCO_REQUIRE_CUDA_DEVICE();
  for (const QuantizeCase& c : QuantizeCases()) {
    SCOPED_TRACE("bits " + std::to_string(c.bits) + " block " + std::to_string(c.block) + " n " +
                 std::to_string(c.n));
    QuantizeParams p;
    p.bits = c.bits;
    p.block_size = c.block;
    p.rounding = Rounding::kStochastic;
    p.seed = 0xC0FFEEull + static_cast<uint64_t>(c.bits);
    p.index_offset = 3 * static_cast<uint64_t>(c.block);
    ExpectQuantizeParity(QuantizerInput(c.n, c.block, c.bits, 11, true), p, 0);
  }
}

TEST(CudaQuantizeParity, ReportsUnavailableWithoutDevice) {
  if (cuda::DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_TRUE(cuda::BuiltWithCuda());
  float x = 1.0f;
  uint8_t code = 0;
  float scale = 0.0f;
  const Status s = cuda::Quantize(&x, 1, QuantizeParams{}, &code, &scale, nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
}

// --- host checks of kernels/quant_math.h (no GPU needed) -------------------

TEST(QuantMathOnHost, StochasticUniformMatchesCpu) {
  for (uint64_t seed : {0ull, 1ull, 0xDEADBEEFull, ~0ull}) {
    for (uint64_t i = 0; i < 5000; ++i) {
      const uint64_t index = i * 2654435761ull + (i << 40);
      ASSERT_EQ(qmath::StochasticUniform(seed, index), StochasticUniform(seed, index))
          << "seed " << seed << " index " << index;
    }
  }
}

TEST(QuantMathOnHost, Bf16MatchesCpu) {
  std::vector<float> specials = {0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::max(),
                                 -std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                                 -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                                 1.00390625f /* exactly halfway, even */, 1.01171875f /* halfway, odd */};
  for (float f : specials) {
    EXPECT_EQ(qmath::Fp32ToBf16(f), Fp32ToBf16(f)) << f;
  }
  // ~4300 bit patterns spread over all signs, exponents and NaN payloads.
  for (uint32_t u = 0; u < 0xFFFFFFFFu - 1000003u; u += 1000003u) {
    float f;
    std::memcpy(&f, &u, sizeof(f));
    ASSERT_EQ(qmath::Fp32ToBf16(f), Fp32ToBf16(f)) << std::hex << u;
    const uint16_t b = static_cast<uint16_t>(u >> 16);
    uint32_t a, c;
    const float fa = qmath::Bf16ToFp32(b), fc = Bf16ToFp32(b);
    std::memcpy(&a, &fa, 4);
    std::memcpy(&c, &fc, 4);
    ASSERT_EQ(a, c);
  }
}

// Re-quantizes with the host build of the kernels' element functions and
// compares with cpu::Quantize: the same codes and scales, bit for bit.
TEST(QuantMathOnHost, QuantizerArithmeticMatchesCpu) {
  for (int bits : {2, 4, 8}) {
    for (bool stochastic : {false, true}) {
      const int block = 64;
      const size_t n = 64 * 40 + 7;
      const std::vector<float> x = QuantizerInput(n, block, bits, 3, true);
      QuantizeParams p;
      p.bits = bits;
      p.block_size = block;
      p.rounding = stochastic ? Rounding::kStochastic : Rounding::kNearest;
      p.seed = 42;
      std::vector<uint8_t> codes(PackedBytes(n, bits));
      std::vector<float> scales(NumBlocks(n, block));
      ASSERT_TRUE(cpu::Quantize(x.data(), n, p, codes.data(), scales.data(), nullptr).ok());

      const int qmax = QMax(bits);
      std::vector<uint8_t> mine(codes.size(), 0);
      for (size_t b0 = 0; b0 < n; b0 += block) {
        const size_t end = std::min(n, b0 + block);
        float absmax = 0.0f;
        for (size_t i = b0; i < end; ++i) absmax = qmath::MaxF(absmax, qmath::AbsOrZero(x[i]));
        const float scale = qmath::BlockScale(absmax, qmax);
        const float inv = qmath::BlockInverse(absmax, qmax);
        ASSERT_EQ(FloatBits({scale}), FloatBits({scales[b0 / block]})) << "block " << b0 / block;
        for (size_t i = b0; i < end; ++i) {
          const float v = qmath::IsFinite(x[i]) ? x[i] : 0.0f;
          const int code = stochastic
                               ? qmath::StochasticCode(v, scale, inv, qmax, qmath::StochasticUniform(p.seed, i))
                               : qmath::NearestCode(v, scale, inv, qmax);
          mine[i * bits / 8] |= static_cast<uint8_t>(qmath::CodeField(code, bits) << (i * bits % 8));
          ASSERT_EQ(qmath::FieldCode(qmath::CodeField(code, bits), bits), code);
        }
      }
      EXPECT_EQ(mine, codes) << "bits " << bits << " stochastic " << stochastic;
    }
  }
}

}  // namespace
}  // namespace loco

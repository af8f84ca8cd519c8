// cpu::QuantizeDeltaAdd against what it replaces: the difference,
// cpu::Quantize (nearest) and cpu::DequantizeAdd one after the other (each
// checked against the specification in quantize_test.cc). Bit for bit over
// bits, block sizes, partial last blocks of every length class and the
// hard cases: zero, subnormal, near-overflow and non-finite deltas. The
// same for the AVX2 instance (kernels/avx2_clones.h) where this CPU has
// AVX2, whichever instance QuantizeDeltaAdd runs here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/avx2_clones.h"
#include "kernels/cpu_features.h"
#include "kernels/quantize.h"
#include "tests/common/same_bits.h"
#include "tests/kernels/spec_reference.h"

namespace loco {
namespace {

struct DeltaEncoded {
  std::vector<uint8_t> codes;
  std::vector<float> scales, replica;
  uint64_t nonfinite = 0;
};

// Outputs filled with a pattern no encoder writes, and the replica's start.
DeltaEncoded Unwritten(size_t n, int bits, int block, const std::vector<float>& replica) {
  DeltaEncoded e;
  e.codes.assign(PackedBytes(n, bits), 0xAB);
  e.scales.assign(NumBlocks(n, block), -1.0f);
  e.replica = replica;
  return e;
}

// The three calls the fused pass replaces.
DeltaEncoded Sequential(const std::vector<float>& target, const std::vector<float>& replica,
                        int bits, int block) {
  const size_t n = target.size();
  DeltaEncoded e = Unwritten(n, bits, block, replica);
  std::vector<float> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = target[i] - replica[i];
  QuantizeParams p;
  p.bits = bits;
  p.block_size = block;
  p.rounding = Rounding::kNearest;
  QuantizeStats stats;
  EXPECT_TRUE(cpu::Quantize(d.data(), n, p, e.codes.data(), e.scales.data(), &stats).ok());
  EXPECT_TRUE(
      cpu::DequantizeAdd(e.codes.data(), e.scales.data(), n, bits, block, e.replica.data()).ok());
  e.nonfinite = stats.nonfinite;
  return e;
}

DeltaEncoded Fused(const std::vector<float>& target, const std::vector<float>& replica, int bits,
              int block) {
  const size_t n = target.size();
  DeltaEncoded e = Unwritten(n, bits, block, replica);
  QuantizeStats stats{99};
  EXPECT_TRUE(cpu::QuantizeDeltaAdd(target.data(), e.replica.data(), n, bits, block,
                                    e.codes.data(), e.scales.data(), &stats)
                  .ok());
  e.nonfinite = stats.nonfinite;
  return e;
}

// The AVX2 instance of QuantizeDeltaAdd's loop.
DeltaEncoded FusedAvx2(const std::vector<float>& target, const std::vector<float>& replica,
                       int bits, int block) {
  const size_t n = target.size();
  DeltaEncoded e = Unwritten(n, bits, block, replica);
  e.nonfinite = cpu::detail::QuantizeDeltaAvx2(target.data(), e.replica.data(), n, bits, block,
                                               e.codes.data(), e.scales.data());
  return e;
}

void ExpectSame(const DeltaEncoded& want, const DeltaEncoded& got, const std::string& what) {
  EXPECT_EQ(got.codes, want.codes) << what;
  EXPECT_TRUE(SameBits(got.scales, want.scales)) << what;
  EXPECT_TRUE(SameBits(got.replica, want.replica)) << what;
  EXPECT_EQ(got.nonfinite, want.nonfinite) << what;
}

// A master and a replica that trails it, with a hard case in some blocks:
// `kind` 0 plain, 1 a block with no change (scale 0), 2 subnormal changes
// (the inverse scale is not finite), 3 changes near FLT_MAX, 4 non-finite
// differences (NaN, and an overflow to infinity), 5 a non-finite replica.
void MakeCase(size_t n, size_t block, int kind, uint32_t seed, std::vector<float>* target,
              std::vector<float>* replica) {
  *replica = testing_ref::RandomVector(n, seed);
  std::vector<float> step = testing_ref::RandomVector(n, seed + 1, 1e-3f);
  target->resize(n);
  for (size_t i = 0; i < n; ++i) (*target)[i] = (*replica)[i] + step[i];
  if (n == 0) return;
  const size_t last = (n - 1) / block * block;  // the last (maybe partial) block
  const float big = std::numeric_limits<float>::max();
  switch (kind) {
    case 1:
      for (size_t i = 0; i < std::min(n, block); ++i) (*target)[i] = (*replica)[i];
      for (size_t i = last; i < n; ++i) (*target)[i] = (*replica)[i];
      break;
    case 2:
      for (size_t i = last; i < n; ++i) {
        (*replica)[i] = 0.0f;
        (*target)[i] = static_cast<float>(static_cast<int>(i % 7) - 3) *
                       std::numeric_limits<float>::denorm_min();
      }
      break;
    case 3:
      for (size_t i = last; i < n; ++i) {
        (*replica)[i] = (i % 2 ? 0.25f : -0.25f) * big;
        (*target)[i] = (i % 3 ? 0.5f : -0.5f) * big;
      }
      break;
    case 4:
      (*target)[n / 2] = std::numeric_limits<float>::quiet_NaN();
      (*target)[n - 1] = big;
      (*replica)[n - 1] = -big;  // big - (-big) overflows
      break;
    case 5:
      (*replica)[last] = std::numeric_limits<float>::infinity();
      break;
    default:
      break;
  }
}

TEST(QuantizeDeltaAddTest, GivesTheBitsOfQuantizeThenDequantizeAdd) {
  int cases = 0;
  for (int bits : {2, 4, 8}) {
    for (int block : {32, 128, 256, 4096}) {
      const size_t b = static_cast<size_t>(block);
      for (size_t n : {size_t{1}, size_t{15}, size_t{17}, size_t{33}, b - 1, b, b + 16,
                       3 * b + 5, 2 * b + 31}) {
        for (int kind = 0; kind < 6; ++kind) {
          std::vector<float> target, replica;
          MakeCase(n, b, kind, static_cast<uint32_t>(n * 7 + kind + bits), &target, &replica);
          const DeltaEncoded want = Sequential(target, replica, bits, block);
          const std::string what = "bits " + std::to_string(bits) + " block " +
                                   std::to_string(block) + " n " + std::to_string(n) +
                                   " case " + std::to_string(kind);
          ExpectSame(want, Fused(target, replica, bits, block), what);
          if (cpu::detail::HaveAvx2()) {
            ExpectSame(want, FusedAvx2(target, replica, bits, block), what + " (AVX2)");
          }
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 3 * 4 * 9 * 6);
}

TEST(QuantizeDeltaAddTest, MovesTheReplicaToWithinHalfAScaleOfTheTarget) {
  // The closed form the return path relies on: after the call every finite
  // element of the replica is within scale/2 (plus the rounding the header
  // of kernels/quantize.h allows) of the target.
  const size_t n = 1000, block = 128;
  std::vector<float> target, replica;
  MakeCase(n, block, 0, 7, &target, &replica);
  std::vector<uint8_t> codes(PackedBytes(n, 4));
  std::vector<float> scales(NumBlocks(n, block));
  QuantizeStats stats;
  ASSERT_TRUE(cpu::QuantizeDeltaAdd(target.data(), replica.data(), n, 4, block, codes.data(),
                                    scales.data(), &stats)
                  .ok());
  EXPECT_EQ(stats.nonfinite, 0u);
  for (size_t i = 0; i < n; ++i) {
    const double s = scales[i / block];
    ASSERT_GT(s, 0.0);
    EXPECT_LE(std::fabs(static_cast<double>(target[i]) - replica[i]), s * (0.5 + 1e-5) + 1e-6)
        << i;
  }
}

TEST(QuantizeDeltaAddTest, RangesOfWholeBlocksEncodeAsOneCall) {
  const size_t n = 5 * 256 + 40, block = 256;
  std::vector<float> target, replica;
  MakeCase(n, block, 0, 11, &target, &replica);
  const DeltaEncoded whole = Fused(target, replica, 4, block);
  DeltaEncoded parts = Unwritten(n, 4, block, replica);
  // Out of order, one and two blocks at a time, the partial last block alone.
  const std::vector<std::pair<size_t, size_t>> ranges = {
      {768, 256}, {0, 256}, {1280, 40}, {256, 512}, {1024, 256}};
  for (const auto& [begin, count] : ranges) {
    ASSERT_TRUE(cpu::QuantizeDeltaAdd(target.data() + begin, parts.replica.data() + begin, count,
                                      4, block, parts.codes.data() + begin / 2,
                                      parts.scales.data() + begin / block, nullptr)
                    .ok());
  }
  ExpectSame(whole, parts, "in ranges");
}

TEST(QuantizeDeltaAddTest, RefusesBadArgumentsAndChangesNothing) {
  std::vector<float> target(64, 1.0f), replica(64, 0.5f);
  std::vector<uint8_t> codes(32, 0xAB);
  std::vector<float> scales(2, -1.0f);
  const std::vector<float> replica_before = replica;
  for (int bits : {0, 3, 16}) {
    const Status s = cpu::QuantizeDeltaAdd(target.data(), replica.data(), 64, bits, 32,
                                           codes.data(), scales.data(), nullptr);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bits;
  }
  EXPECT_EQ(cpu::QuantizeDeltaAdd(target.data(), replica.data(), 64, 4, 48, codes.data(),
                                  scales.data(), nullptr)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu::QuantizeDeltaAdd(nullptr, replica.data(), 64, 4, 32, codes.data(),
                                  scales.data(), nullptr)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(SameBits(replica, replica_before));
  EXPECT_EQ(codes, std::vector<uint8_t>(32, 0xAB));
  EXPECT_TRUE(cpu::QuantizeDeltaAdd(nullptr, nullptr, 0, 4, 32, nullptr, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace loco

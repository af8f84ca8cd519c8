#include "kernels/cast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace loco {
namespace {

uint32_t Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float FromBits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Round to nearest even, from values rather than bit tricks: pick the closer
// of the two bf16 neighbours of x (by magnitude, computed in double), ties to
// the even mantissa. The neighbour above the largest finite bf16 is Inf,
// which IEEE rounding treats as the value 2^128.
uint16_t Bf16Ref(float x) {
  const uint32_t u = Bits(x);
  if (std::isnan(x)) return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7FC0u);
  if (std::isinf(x)) return static_cast<uint16_t>(u >> 16);
  const uint16_t lo = static_cast<uint16_t>(u >> 16);  // truncation toward zero
  const uint16_t hi = static_cast<uint16_t>(lo + 1);   // next magnitude, same sign
  auto magnitude = [](uint16_t b) {
    if ((b & 0x7FFF) == 0x7F80) return std::ldexp(1.0, 128);
    return std::fabs(static_cast<double>(FromBits(static_cast<uint32_t>(b) << 16)));
  };
  const double ax = std::fabs(static_cast<double>(x));
  const double dlo = ax - magnitude(lo), dhi = magnitude(hi) - ax;
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(CastTest, AllBf16PatternsRoundTripThroughFp32) {
  std::vector<uint16_t> all(65536);
  for (uint32_t b = 0; b < 65536; ++b) all[b] = static_cast<uint16_t>(b);
  std::vector<float> wide(65536);
  cpu::CastBf16ToFp32(all.data(), all.size(), wide.data());
  std::vector<uint16_t> back(65536);
  cpu::CastFp32ToBf16(wide.data(), wide.size(), back.data());
  for (uint32_t b = 0; b < 65536; ++b) {
    ASSERT_EQ(Bits(wide[b]), b << 16) << b;
    ASSERT_EQ(Bits(Bf16ToFp32(static_cast<uint16_t>(b))), b << 16) << b;
    const bool nan = (b & 0x7FFF) > 0x7F80;
    const uint16_t want = nan ? static_cast<uint16_t>((b & 0x8000) | 0x7FC0) : static_cast<uint16_t>(b);
    ASSERT_EQ(back[b], want) << std::hex << b;
    ASSERT_EQ(Fp32ToBf16(wide[b]), want) << std::hex << b;
  }
}

TEST(CastTest, TiesRoundToEven) {
  std::mt19937 rng(7);
  std::vector<uint16_t> samples = {0x0000, 0x0001, 0x3F80, 0x3F81, 0x7F7E, 0x7F7F, 0x8001, 0xBF80, 0xFF7F};
  for (int i = 0; i < 2000; ++i) samples.push_back(static_cast<uint16_t>(rng()));
  for (uint16_t b : samples) {
    if ((b & 0x7FFF) >= 0x7F80) continue;  // Inf/NaN have no finite tie above them
    const uint32_t base = static_cast<uint32_t>(b) << 16;
    const uint16_t even = (b & 1) ? static_cast<uint16_t>(b + 1) : b;
    EXPECT_EQ(Fp32ToBf16(FromBits(base | 0x8000)), even) << std::hex << b;  // exact tie
    EXPECT_EQ(Fp32ToBf16(FromBits(base | 0x8001)), static_cast<uint16_t>(b + 1)) << std::hex << b;
    EXPECT_EQ(Fp32ToBf16(FromBits(base | 0x7FFF)), b) << std::hex << b;
    EXPECT_EQ(Fp32ToBf16(FromBits(base | 0x0001)), b) << std::hex << b;
  }
  // 0x7F7F is odd: the tie above the largest finite bf16 rounds to +Inf.
  EXPECT_EQ(Fp32ToBf16(FromBits(0x7F7F8000u)), 0x7F80);
  EXPECT_EQ(Fp32ToBf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(Fp32ToBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(Fp32ToBf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(Fp32ToBf16(std::numeric_limits<float>::quiet_NaN()), 0x7FC0);
  EXPECT_EQ(Fp32ToBf16(FromBits(0xFF800001u)), 0xFFC0);  // negative signaling NaN
  EXPECT_EQ(Fp32ToBf16(FromBits(0x7F800001u)), 0x7FC0);  // would truncate to Inf
}

TEST(CastTest, RandomFp32MatchesValueBasedReference) {
  std::mt19937 rng(11);
  std::vector<float> x(1 << 20);
  for (auto& v : x) v = FromBits(static_cast<uint32_t>(rng()));
  std::vector<uint16_t> out(x.size());
  cpu::CastFp32ToBf16(x.data(), x.size(), out.data());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(out[i], Bf16Ref(x[i])) << std::hex << Bits(x[i]);
  }
}

}  // namespace
}  // namespace loco

// CPU fp32 <-> bf16 casts (contract: kernels/cast.h).
//
// fp32 -> bf16: round to nearest even on the top 16 bits,
//   bits += 0x7FFF + ((bits >> 16) & 1); result = bits >> 16,
// which also keeps ±Inf and rounds values past the largest bf16 to ±Inf;
// NaN -> 0x7FC0 | sign (a quiet NaN). bf16 -> fp32 is exact: bits << 16.
#include <bit>

#include "kernels/cast.h"
#include "kernels/cpu_clones.h"

namespace loco {
namespace {

inline uint16_t ToBf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = ((u >> 16) & 0x8000u) | 0x7FC0u;
  return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

inline float FromBf16(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

}  // namespace

uint16_t Fp32ToBf16(float x) { return ToBf16(x); }
float Bf16ToFp32(uint16_t b) { return FromBf16(b); }

namespace cpu {
namespace {

LOCO_CPU_CLONES void CastFp32ToBf16Loop(const float* in, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = ToBf16(in[i]);
}

LOCO_CPU_CLONES void CastBf16ToFp32Loop(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = FromBf16(in[i]);
}

}  // namespace

void CastFp32ToBf16(const float* in, size_t n, uint16_t* out) { CastFp32ToBf16Loop(in, n, out); }
void CastBf16ToFp32(const uint16_t* in, size_t n, float* out) { CastBf16ToFp32Loop(in, n, out); }

}  // namespace cpu
}  // namespace loco

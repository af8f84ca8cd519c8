// fp32 <-> bf16 casts for the return path. fp32 -> bf16 rounds to nearest
// even; NaN stays NaN (quiet), ±Inf stays ±Inf. bf16 values are uint16_t bit
// patterns (the top 16 bits of an fp32).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace loco {

uint16_t Fp32ToBf16(float x);
float Bf16ToFp32(uint16_t b);

namespace cpu {
void CastFp32ToBf16(const float* in, size_t n, uint16_t* out);
void CastBf16ToFp32(const uint16_t* in, size_t n, float* out);
}  // namespace cpu

namespace cuda {
Status CastFp32ToBf16(const float* in, size_t n, uint16_t* out, void* stream);
Status CastBf16ToFp32(const uint16_t* in, size_t n, float* out, void* stream);
}  // namespace cuda
}  // namespace loco

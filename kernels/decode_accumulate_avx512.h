// The AVX-512 path of cpu::DecodeAccumulateRange for payloads that are all
// 4-bit block-quant (the default wire codec). Internal to kernels/:
// decode_accumulate_cpu.cc takes it when HaveAvx512() (kernels/cpu_features.h).
//
// It decodes by table: per payload and block, the 16 values (float)code *
// scale of the 16 possible codes are one vector, made with the contract's
// multiply, and vpermps picks each element's value by its 4-bit field. So
// the decoded values, and the sums in payload order, are the bits of the
// portable path, in 2 instructions per 16 elements instead of 6.
#pragma once

#include <cstddef>

#include "kernels/decode_accumulate.h"

namespace loco::cpu::detail {

// Elements [begin, begin + count) of the mean into out[0, count), the
// final values with non-temporal stores when `streaming` (for an out larger
// than the cache: see StreamingStoreBytes in kernels/cpu_features.h; the
// values are the same either way). Preconditions: HaveAvx512(); every
// payload block-quant with bits 4 and valid for the whole length; begin
// and count multiples of 32.
void AccumulateFourBitAvx512(const PayloadView* payloads, size_t n, size_t begin, size_t count,
                             bool streaming, float* out);

}  // namespace loco::cpu::detail

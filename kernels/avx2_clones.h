// The AVX2 instances of kernels whose vector code is compiled as function
// clones (kernels/cpu_clones.h). A CPU with AVX2 and without AVX-512 runs
// this code through the clones, which pick their instance by the CPU; these
// entry points are declared so that benchmarks and tests run it on any CPU
// with AVX2 (on an AVX-512 CPU the clones take the x86-64-v4 instance).
// Internal to kernels/.
//
// Preconditions of each: HaveAvx2() (kernels/cpu_features.h), and the
// arguments its public kernel would have validated. Each does nothing
// where the platform has no AVX2 instance.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/decode_accumulate.h"

namespace loco::cpu::detail {

// DecodeAccumulateRange's path for payloads that all have the same `bits`
// (AccumulateBlockQuant, kernels/decode_accumulate_cpu.cc): elements
// [begin, begin + count) of the mean into out[0, count); begin a multiple
// of 32.
void AccumulateBlockQuantAvx2(const PayloadView* payloads, size_t n, size_t begin, size_t count,
                              int bits, float* out);

// QuantizeDeltaAdd (kernels/quantize.h) after its checks; returns the
// count of non-finite differences.
uint64_t QuantizeDeltaAvx2(const float* target, float* replica, size_t n, int bits, int block_size,
                           uint8_t* codes, float* scales);

}  // namespace loco::cpu::detail

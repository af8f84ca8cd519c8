// The AVX-512 path of cpu::LocoCompress, and the portable path beside it.
// Internal to kernels/: cpu::LocoCompress (kernels/loco_compress.h) picks
// one; tests and benchmarks call both to compare them.
//
// Both follow the binding arithmetic of kernels/loco_compress_cpu.cc and
// give the same bits for payload codes, scales, stored error codes and
// scales, the non-finite count and error_sq_norm. grad_sq_norm, a metric,
// is summed in another order (16 float lanes instead of 8) and agrees
// within the tolerance the header states.
//
// Why a second path: the portable one runs on 8-lane vectors that every
// x86-64 clone can express, and on AVX-512 machines it spends its time in
// byte shuffles and lane crossings. With 16 lanes, AVX-512's widening and
// narrowing moves and RNE conversions it does the same work in about
// half the instructions (bench/README.md, "Kernels").
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/loco_compress.h"

namespace loco::cpu::detail {

// True when this CPU runs AVX-512 F, BW, VL and DQ (checked once).
bool HaveAvx512();

// True for the cases the AVX-512 path implements: kEf or kLoco with an
// 8-bit error state and nearest rounding, any bits and block size. Every
// other case (kNaive, error_bits 32, stochastic rounding) is portable only.
bool Avx512Handles(const LocoParams& p);

// Preconditions: validated arguments (ValidateLocoCall), `reset` computed
// from the step as cpu::LocoCompress does; for the AVX-512 path also
// HaveAvx512() and Avx512Handles(p). Not thread-safe on the same state.
void LocoCompressAvx512(const float* g, size_t n, bool reset, const LocoParams& p,
                        ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats);
void LocoCompressPortable(const float* g, size_t n, bool reset, const LocoParams& p,
                          ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats);

}  // namespace loco::cpu::detail

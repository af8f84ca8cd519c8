// The vector paths of cpu::LocoCompress (AVX-512 and AVX2), and the
// portable path beside them. Internal to kernels/: cpu::LocoCompress
// (kernels/loco_compress.h) picks one; tests and benchmarks call each to
// compare them.
//
// All follow the binding arithmetic of kernels/loco_compress_cpu.cc and
// give the same bits for payload codes, scales, stored error codes and
// scales, the non-finite count and error_sq_norm. grad_sq_norm, a metric,
// is summed in another order and agrees within the tolerance the header
// states.
//
// Why vector paths beside the portable one: the portable one is written in
// GCC's generic 8-lane vectors, which every x86-64 clone can express, and
// spends its time in byte shuffles and lane crossings. The vector paths are
// one kernel (kernels/loco_compress_simd_inl.h) over each ISA's widening
// and narrowing moves, saturating packs and RNE conversions
// (bench/README.md, "Kernels").
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"  // HaveAvx512Icl, HaveAvx512, HaveAvx2
#include "kernels/loco_compress.h"

namespace loco::cpu::detail {

// True for the cases the vector paths implement: kEf or kLoco with an
// 8-bit error state and nearest rounding, any bits and block size. Every
// other case (kNaive, error_bits 32, stochastic rounding) is portable only.
bool Avx512Handles(const LocoParams& p);

// Preconditions: validated arguments (ValidateLocoCall), `reset` computed
// from the step as cpu::LocoCompress does; for a vector path also
// Avx512Handles(p) and HaveAvx512Icl() / HaveAvx512() / HaveAvx2()
// (kernels/cpu_features.h). Not thread-safe on the
// same state.
void LocoCompressAvx512Icl(const float* g, size_t n, bool reset, const LocoParams& p,
                           ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats);
void LocoCompressAvx512(const float* g, size_t n, bool reset, const LocoParams& p,
                        ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats);
void LocoCompressAvx2(const float* g, size_t n, bool reset, const LocoParams& p,
                      ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats);
void LocoCompressPortable(const float* g, size_t n, bool reset, const LocoParams& p,
                          ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats);

}  // namespace loco::cpu::detail

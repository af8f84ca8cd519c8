// Which vector instruction sets this CPU runs, for the kernels that pick a
// path at run time, and for SmallBatchGemm (models/small_batch_gemm.h).
// Internal to kernels/ otherwise. Each answer is computed once and
// fixed for the process's life; on platforms without the x86 paths all
// are false.
#pragma once

#include <cstddef>

namespace loco::cpu::detail {

// AVX-512 F, BW, VL and DQ, and FMA.
bool HaveAvx512();
// HaveAvx512() and AVX-512 VBMI and VNNI (the Ice Lake level; Zen 4 too).
bool HaveAvx512Icl();
// AVX2 and FMA.
bool HaveAvx2();

// HaveAvx512(), and this CPU runs each 512-bit FMA as two 256-bit halves,
// or as slowly: 512-bit FMAs take at least 1.5 times as long as as many
// 256-bit ones, timed once (the fastest of 7 runs of a few microseconds
// each, so a preemption or a frequency change does not decide it). Zen 4
// and AVX-512 CPUs with one 512-bit FMA unit say yes; Zen 5 servers and
// the Xeons with two units no. A kernel that fills only half of each zmm
// register asks it to run on ymm instead where that costs nothing.
bool Avx512SplitsZmm();

// The working set (bytes read and written by one call) past which a
// kernel writes its output with non-temporal stores: one CPU's share of
// the last-level cache (its size over the CPUs online; 32 MiB in all where
// the system does not say), the share each thread can count on when all
// of them run such calls at once. A call past it evicts its own output
// before it ends, so reading each output line before overwriting it (what
// an ordinary store does) only costs bandwidth. glibc's memcpy switches at
// 3/4 of the same share.
size_t StreamingStoreBytes();

}  // namespace loco::cpu::detail

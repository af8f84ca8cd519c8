// AdviseBlasKernels: whether OpenBLAS runs narrower kernels than the CPU
// offers, and what to set instead (a BlasAdvice).
//
// OpenBLAS (a DYNAMIC_ARCH build, as Debian ships it) picks its kernels from
// the CPU when it loads. A release that does not know a newer processor
// falls back to its oldest kernels: OpenBLAS 0.3.21 runs "Prescott" (SSE3)
// on an Intel Xeon of model 207, 2-3x slower in the MLP's products than its
// AVX2 or AVX-512 kernels on the same CPU. The worker cannot switch kernels
// once the library is loaded, so it says so at start-up and names the
// setting that would. In common/: the launcher, which shows the workers'
// advice once for all of them, words it with the same ToString.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace loco {

// The vector instructions the products could use.
struct CpuVectors {
  bool avx2_fma = false;  // AVX2 and FMA: OpenBLAS's Haswell/Zen kernels
  bool avx512 = false;    // AVX-512 F/CD/BW/DQ/VL: its SkylakeX kernels
};

// This process's CPU (cpuid through the compiler's builtins).
CpuVectors DetectCpuVectors();

// Kernels narrower than the CPU's vectors, and the core that would run
// wider ones.
struct BlasAdvice {
  std::string core;     // what OpenBLAS runs, e.g. "Prescott"
  std::string wider;    // OPENBLAS_CORETYPE that would run wider kernels
  std::string vectors;  // what the CPU has: "AVX-512" or "AVX2"
  // One line for a log: what runs, what to set, and to check it first.
  std::string ToString() const;
};

// Advice when `core` (openblas_get_corename()) is a kernel set narrower than
// what `cpu` runs and `pinned` (OPENBLAS_CORETYPE is set) is false; nullopt
// otherwise: a pin is the operator's choice (some OpenBLAS builds compute
// wrong results on some processors), and a core name this function does not
// know is left alone. Pure: no I/O.
std::optional<BlasAdvice> AdviseBlasKernels(std::string_view core, CpuVectors cpu, bool pinned);


}  // namespace loco

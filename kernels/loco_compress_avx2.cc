// The AVX2 path of cpu::LocoCompress (contract:
// kernels/loco_compress_avx512.h): the vector kernel of
// kernels/loco_compress_simd_inl.h on 8 lanes, for x86-64 CPUs without
// AVX-512.
#include "kernels/loco_compress_avx512.h"

// Last: their pragmas hold to the end of the file.
#include "kernels/simd_avx2.h"

#if LOCO_HAVE_AVX512_TARGET
#define LOCO_SIMD_TARGET __attribute__((target("avx2,fma")))
#include "kernels/loco_compress_simd_inl.h"
#endif

namespace loco::cpu::detail {

#if LOCO_HAVE_AVX512_TARGET

bool HaveAvx2() {
  // A fact about the machine, fixed for the process's life.
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return have;
}

void LocoCompressAvx2(const float* g, size_t n, bool reset, const LocoParams& p,
                      ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats) {
  simd::LocoCompressVector<Avx2Isa>(g, n, reset, p, state, codes, scales, stats);
}

#else  // no AVX2 path on this platform

bool HaveAvx2() { return false; }

void LocoCompressAvx2(const float* g, size_t n, bool reset, const LocoParams& p,
                      ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats) {
  LocoCompressPortable(g, n, reset, p, state, codes, scales, stats);
}

#endif

}  // namespace loco::cpu::detail

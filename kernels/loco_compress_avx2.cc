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

void LocoCompressAvx2(const float* g, size_t n, bool reset, const LocoParams& p,
                      ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats) {
  simd::LocoCompressVector<Avx2Isa>(g, n, reset, p, state, codes, scales, stats);
}

#else  // no AVX2 path on this platform

void LocoCompressAvx2(const float* g, size_t n, bool reset, const LocoParams& p,
                      ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats) {
  LocoCompressPortable(g, n, reset, p, state, codes, scales, stats);
}

#endif

}  // namespace loco::cpu::detail

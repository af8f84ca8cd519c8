// The AVX-512 path of cpu::LocoCompress for CPUs at the Ice Lake level
// (contract: kernels/loco_compress_avx512.h): the vector kernel of
// kernels/loco_compress_simd_inl.h on Avx512IclIsa (kernels/simd_avx512.h),
// which narrows and packs codes with vpermt2b and sums their squares with
// vpdpbusd.
#include "kernels/loco_compress_avx512.h"

// Last: their pragmas hold to the end of the file.
#include "kernels/simd_avx512.h"

#if LOCO_HAVE_AVX512_TARGET
#define LOCO_SIMD_TARGET LOCO_AVX512_ICL_TARGET
#include "kernels/loco_compress_simd_inl.h"
#endif

namespace loco::cpu::detail {

#if LOCO_HAVE_AVX512_TARGET

void LocoCompressAvx512Icl(const float* g, size_t n, bool reset, const LocoParams& p,
                           ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats) {
  simd::LocoCompressVector<Avx512IclIsa>(g, n, reset, p, state, codes, scales, stats);
}

#else  // no AVX-512 path on this platform

void LocoCompressAvx512Icl(const float* g, size_t n, bool reset, const LocoParams& p,
                           ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats) {
  LocoCompressPortable(g, n, reset, p, state, codes, scales, stats);
}

#endif

}  // namespace loco::cpu::detail

// The 8-lane ISA of small_batch_gemm_tiles_inl.h (GemmYmm): 256-bit
// vectors and 16 registers, with AVX2 and FMA. The AVX2 path runs all
// three products on it (small_batch_gemm_avx2.cc); the AVX-512 path runs
// its forward on it when the batch fits 8 lanes (small_batch_gemm_avx512.cc).
// Internal to models/.
//
// The including file defines LOCO_SIMD_TARGET (a target with AVX2 and FMA)
// and includes this header, with small_batch_gemm_tiles_inl.h, after every
// other one; GemmYmm lives in an unnamed namespace, so each file has its
// own copy, compiled for its own target.
#pragma once

#include <immintrin.h>

#include <cstddef>

#ifndef LOCO_SIMD_TARGET
#error "define LOCO_SIMD_TARGET (the ISA's target attribute) before including this header"
#endif
#ifndef LOCO_GEMM_INLINE
#define LOCO_GEMM_INLINE static inline __attribute__((always_inline)) LOCO_SIMD_TARGET
#endif

namespace loco::small_batch {
namespace {

struct GemmYmm {
  using Vec = __m256;
  using Mask = __m256i;  // lane k taken where its sign bit is set
  static constexpr size_t kLanes = 8;
  // 4 × 3 accumulators, 3 row vectors and a broadcast: all 16 registers.
  // Measured on a Zen 3 at 16 rows against 8 × 1, 4 × 2 and 6 × 2: the
  // fewest loads per multiply-add (bench/README.md, "The small-batch
  // products").
  static constexpr int kTileRows = 4;
  static constexpr int kTileVectors = 3;
  // At most 8 rows of w (4 KiB multiples apart, so in one L1 set of 8
  // ways) per chunk; 12 was a third slower, 6 the same.
  static constexpr size_t kInputChunkRows = 8;
  // 6, 12 or 12 accumulators: more than 8 weight rows would share one L1
  // set as above (12 rows took twice as long as 6).
  static constexpr int ForwardRows(int nv) { return nv == 4 ? 3 : 6; }

  LOCO_GEMM_INLINE Vec Zero() { return _mm256_setzero_ps(); }
  LOCO_GEMM_INLINE Vec Broadcast(float f) { return _mm256_set1_ps(f); }
  LOCO_GEMM_INLINE Vec Fma(Vec a, Vec b, Vec acc) { return _mm256_fmadd_ps(a, b, acc); }
  LOCO_GEMM_INLINE Vec Load(const float* p) { return _mm256_loadu_ps(p); }
  LOCO_GEMM_INLINE void Store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  LOCO_GEMM_INLINE Mask FullMask() { return _mm256_set1_epi32(-1); }
  LOCO_GEMM_INLINE Mask TailMask(size_t columns) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(columns)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  LOCO_GEMM_INLINE Vec MaskedLoad(Mask m, const float* p) { return _mm256_maskload_ps(p, m); }
  LOCO_GEMM_INLINE void MaskedStore(float* p, Mask m, Vec v) { _mm256_maskstore_ps(p, m, v); }
};

}  // namespace
}  // namespace loco::small_batch

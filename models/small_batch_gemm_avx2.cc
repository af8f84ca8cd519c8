// SmallBatchGemm's AVX2 path (models/small_batch_gemm_paths.h): the
// loops of small_batch_gemm_tiles_inl.h on 8 float lanes and 16 ymm
// registers.
#include <cstdint>

#include "models/small_batch_gemm_paths.h"

// Last: its pragmas hold to the end of the file.
#include "kernels/avx512_target.h"

#if LOCO_HAVE_AVX512_TARGET
#define LOCO_SIMD_TARGET __attribute__((target("avx2,fma")))
#include "models/small_batch_gemm_tiles_inl.h"
#define LOCO_GEMM_INLINE static inline __attribute__((always_inline)) LOCO_SIMD_TARGET

namespace loco::small_batch {
namespace {

struct GemmAvx2 {
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

const Products& Avx2Products() {
  static constexpr Products kProducts{&Forward<GemmAvx2>, &WeightGradient<GemmAvx2>,
                                      &InputGradient<GemmAvx2>};
  return kProducts;
}

}  // namespace loco::small_batch

#else  // no AVX2 path on this platform

namespace loco::small_batch {

const Products& Avx2Products() { return PortableProducts(); }

}  // namespace loco::small_batch

#endif

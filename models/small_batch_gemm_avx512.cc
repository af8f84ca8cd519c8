// SmallBatchGemm's AVX-512 path (models/small_batch_gemm_paths.h): the
// loops of small_batch_gemm_tiles_inl.h on 16 float lanes and 32 zmm
// registers.
#include <cstdint>

#include "models/small_batch_gemm_paths.h"

// Last: its pragmas hold to the end of the file.
#include "kernels/avx512_target.h"

#if LOCO_HAVE_AVX512_TARGET
#define LOCO_SIMD_TARGET __attribute__((target("avx512f,fma")))
#include "models/small_batch_gemm_tiles_inl.h"
#define LOCO_GEMM_INLINE static inline __attribute__((always_inline)) LOCO_SIMD_TARGET

namespace loco::small_batch {
namespace {

struct GemmAvx512 {
  using Vec = __m512;
  using Mask = __mmask16;
  static constexpr size_t kLanes = 16;
  // 8 × 3 accumulators, 3 row vectors and a broadcast: 28 of 32 registers.
  // These sizes were measured on a Xeon (bench/README.md), before the
  // weight and input gradients read packed copies of x, deltaᵀ and out.
  static constexpr int kTileRows = 8;
  static constexpr int kTileVectors = 3;
  static constexpr size_t kInputChunkRows = 32;
  static constexpr int ForwardRows(int nv) { return nv <= 2 ? 10 : 5; }

  LOCO_GEMM_INLINE Vec Zero() { return _mm512_setzero_ps(); }
  LOCO_GEMM_INLINE Vec Broadcast(float f) { return _mm512_set1_ps(f); }
  LOCO_GEMM_INLINE Vec Fma(Vec a, Vec b, Vec acc) { return _mm512_fmadd_ps(a, b, acc); }
  LOCO_GEMM_INLINE Vec Load(const float* p) { return _mm512_loadu_ps(p); }
  LOCO_GEMM_INLINE void Store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  LOCO_GEMM_INLINE Mask FullMask() { return 0xFFFF; }
  LOCO_GEMM_INLINE Mask TailMask(size_t columns) {
    return static_cast<Mask>((uint32_t{1} << columns) - 1u);
  }
  LOCO_GEMM_INLINE Vec MaskedLoad(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  LOCO_GEMM_INLINE void MaskedStore(float* p, Mask m, Vec v) { _mm512_mask_storeu_ps(p, m, v); }
};

}  // namespace

const Products& Avx512Products() {
  static constexpr Products kProducts{&Forward<GemmAvx512>, &WeightGradient<GemmAvx512>,
                                      &InputGradient<GemmAvx512>};
  return kProducts;
}

}  // namespace loco::small_batch

#else  // no AVX-512 path on this platform

namespace loco::small_batch {

const Products& Avx512Products() { return PortableProducts(); }

}  // namespace loco::small_batch

#endif

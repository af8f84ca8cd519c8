// SmallBatchGemm's AVX-512 path (models/small_batch_gemm_paths.h): the
// loops of small_batch_gemm_tiles_inl.h on 16 float lanes and 32 zmm
// registers, but for the forward of a batch that fits 8 lanes on a CPU
// that splits zmm operations in two, which runs on GemmYmm
// (small_batch_gemm_isa_ymm_inl.h).
#include <cstdint>

#include "kernels/cpu_features.h"
#include "models/small_batch_gemm_paths.h"

// Last: its pragmas hold to the end of the file.
#include "kernels/avx512_target.h"

#if LOCO_HAVE_AVX512_TARGET
#define LOCO_SIMD_TARGET __attribute__((target("avx512f,fma")))
#define LOCO_GEMM_INLINE static inline __attribute__((always_inline)) LOCO_SIMD_TARGET
#include "models/small_batch_gemm_isa_ymm_inl.h"
#include "models/small_batch_gemm_tiles_inl.h"

namespace loco::small_batch {
namespace {

struct GemmAvx512 {
  using Vec = __m512;
  using Mask = __mmask16;
  static constexpr size_t kLanes = 16;
  // 8 × 3 accumulators, 3 row vectors and a broadcast: 28 of 32 registers.
  // These tile sizes were measured on a Xeon (bench/README.md), before the
  // weight and input gradients read packed copies of x, deltaᵀ and out.
  static constexpr int kTileRows = 8;
  static constexpr int kTileVectors = 3;
  // 16 rows of w per chunk, measured on a Zen 4 with the packed copies: the
  // input gradient took 2.0-2.1 ms at 8 batch rows (3.5-3.6 with 32 per
  // chunk, 2.3 with 8, 2.5-2.6 with 24), 3.6-3.7 at 16 rows and 6.7-6.8 at
  // 32 (4.1-4.4 and 7.5 with 32 per chunk); 12 was as fast as 16.
  static constexpr size_t kInputChunkRows = 16;
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

// A batch of at most 8 rows fills half of each zmm the forward multiplies
// (the batch is in the lanes). A CPU that runs a zmm operation as two ymm
// halves (Zen 4) pays for the empty half: there the same sums took 2.3-2.5
// ms on ymm instead of 2.8-3.1 on zmm for a 3072 × 3072 layer at 8 rows.
// A CPU with whole 512-bit units (Zen 5) gains from the wider loads
// instead: 1.96-2.38 ms on zmm against 2.57-2.64 on ymm (medians, 1 to 8
// rows). The sums are the same bits on either (small_batch_gemm_tiles_inl.h).
void ForwardFewRowsOnYmm(const float* x, size_t n, const float* w, size_t o, size_t i, float* out,
                         std::vector<float>* transposed, std::vector<float>* staged) {
  if (n <= GemmYmm::kLanes) {
    Forward<GemmYmm>(x, n, w, o, i, out, transposed, staged);
  } else {
    Forward<GemmAvx512>(x, n, w, o, i, out, transposed, staged);
  }
}

}  // namespace

const Products& Avx512ProductsWith(bool few_rows_on_ymm) {
  static constexpr Products kOnYmm{&ForwardFewRowsOnYmm, &WeightGradient<GemmAvx512>,
                                   &InputGradient<GemmAvx512>};
  static constexpr Products kOnZmm{&Forward<GemmAvx512>, &WeightGradient<GemmAvx512>,
                                   &InputGradient<GemmAvx512>};
  return few_rows_on_ymm ? kOnYmm : kOnZmm;
}

const Products& Avx512Products() { return Avx512ProductsWith(cpu::detail::Avx512SplitsZmm()); }

}  // namespace loco::small_batch

#else  // no AVX-512 path on this platform

namespace loco::small_batch {

const Products& Avx512ProductsWith(bool) { return PortableProducts(); }
const Products& Avx512Products() { return PortableProducts(); }

}  // namespace loco::small_batch

#endif

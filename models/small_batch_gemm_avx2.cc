// SmallBatchGemm's AVX2 path (models/small_batch_gemm_paths.h): the
// loops of small_batch_gemm_tiles_inl.h on GemmYmm, 8 float lanes and 16
// ymm registers (small_batch_gemm_isa_ymm_inl.h).
#include <cstdint>

#include "models/small_batch_gemm_paths.h"

// Last: its pragmas hold to the end of the file.
#include "kernels/avx512_target.h"

#if LOCO_HAVE_AVX512_TARGET
#define LOCO_SIMD_TARGET __attribute__((target("avx2,fma")))
#include "models/small_batch_gemm_isa_ymm_inl.h"
#include "models/small_batch_gemm_tiles_inl.h"

namespace loco::small_batch {

const Products& Avx2Products() {
  static constexpr Products kProducts{&Forward<GemmYmm>, &WeightGradient<GemmYmm>,
                                      &InputGradient<GemmYmm>};
  return kProducts;
}

}  // namespace loco::small_batch

#else  // no AVX2 path on this platform

namespace loco::small_batch {

const Products& Avx2Products() { return PortableProducts(); }

}  // namespace loco::small_batch

#endif

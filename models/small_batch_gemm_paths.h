// The vector paths behind SmallBatchGemm, one set per ISA, and the plain
// loops they must match bit for bit (contract: models/small_batch_gemm.h).
// Internal to models/.
//
// Preconditions of each product: those of the SmallBatchGemm method of the
// same name, and for the vector paths a CPU that runs the ISA
// (SmallBatchGemm::Runs). `transposed` and `staged` are scratch, resized
// as needed. On platforms without the x86 paths the vector paths' tables
// are the plain loops'.
#pragma once

#include <cstddef>
#include <vector>

namespace loco::small_batch {

// One path's three products. Every path has these signatures; the plain
// loops need no scratch and ignore it.
struct Products {
  void (*forward)(const float* x, size_t n, const float* w, size_t o, size_t i, float* out,
                  std::vector<float>* transposed, std::vector<float>* staged);
  void (*weight_gradient)(const float* delta, size_t n, size_t o, const float* x, size_t i,
                          size_t row_begin, size_t row_end, float* dw,
                          std::vector<float>* transposed, std::vector<float>* staged);
  void (*input_gradient)(const float* delta, size_t n, const float* w, size_t o, size_t i,
                         float* out, std::vector<float>* transposed, std::vector<float>* staged);
};

// The AVX-512 path this CPU suits: a forward of at most 8 rows runs on
// ymm where the CPU splits each zmm operation in two
// (kernels/cpu_features.h, Avx512SplitsZmm), else on zmm as the rest.
const Products& Avx512Products();
// The AVX-512 path with that forward on ymm or on zmm whatever the CPU,
// so that the tests check both against the plain loops.
const Products& Avx512ProductsWith(bool few_rows_on_ymm);
const Products& Avx2Products();
// The plain loops: each element one std::fma chain from zero, in the
// order the vector paths keep.
const Products& PortableProducts();

}  // namespace loco::small_batch

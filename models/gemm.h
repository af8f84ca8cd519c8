// Gemm: the CPU models' dense matrix product on OpenBLAS (cblas_sgemm),
// row-major:
//   C[m×n] = op(A) · op(B) + beta · C
// op(A) is A [m×k] or, with trans_a, Aᵀ of A [k×m]; op(B) likewise [k×n];
// lda, ldb and ldc are the row strides. beta = 0 overwrites C, 1 adds to it.
// Runs on OpenBLAS's threads (process state, set by the caller).
#pragma once

#include <cstddef>

namespace loco {

void Gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, const float* a, size_t lda,
          const float* b, size_t ldb, float beta, float* c, size_t ldc);

}  // namespace loco

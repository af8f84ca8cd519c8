#include "models/gemm.h"

#include <cblas.h>

namespace loco {

void Gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, const float* a, size_t lda,
          const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

}  // namespace loco

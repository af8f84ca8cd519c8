// SmallBatchGemm (contract: models/small_batch_gemm.h): picks a path and
// holds the plain loops that every path must match bit for bit. The
// vector loops are models/small_batch_gemm_tiles_inl.h.
#include "models/small_batch_gemm.h"

#include <cassert>
#include <cmath>

#include "kernels/cpu_features.h"
#include "models/small_batch_gemm_paths.h"

namespace loco {

bool SmallBatchGemm::Runs(Path path) {
  switch (path) {
    case Path::kAvx512:
      return cpu::detail::HaveAvx512();
    case Path::kAvx2:
      return cpu::detail::HaveAvx2();
    case Path::kPortable:
      return true;
  }
  return false;
}

SmallBatchGemm::Path SmallBatchGemm::BestPath() {
  if (Runs(Path::kAvx512)) return Path::kAvx512;
  if (Runs(Path::kAvx2)) return Path::kAvx2;
  return Path::kPortable;
}

bool SmallBatchGemm::Available() { return BestPath() != Path::kPortable; }

size_t SmallBatchGemm::MaxRows(Path path) { return path == Path::kAvx2 ? 32 : kMaxRows; }

std::string SmallBatchGemm::Describe(Path path) {
  switch (path) {
    case Path::kAvx512:
      // Which of the two Avx512Products() is (small_batch_gemm_avx512.cc).
      return cpu::detail::Avx512SplitsZmm() ? "avx512 (a forward of at most 8 rows on ymm)"
                                            : "avx512 (a forward of at most 8 rows on zmm)";
    case Path::kAvx2:
      return "avx2";
    case Path::kPortable:
      break;
  }
  return "portable";
}

bool SmallBatchGemm::Suits(size_t n, size_t o, size_t i) {
  return n >= 1 && n <= MaxRows(BestPath()) && o >= 16 && i >= 16 && o * i >= kMinWeights &&
         Available();
}

SmallBatchGemm::SmallBatchGemm(Path path)
    : path_(path),
      products_(path == Path::kAvx512 ? &small_batch::Avx512Products()
                : path == Path::kAvx2 ? &small_batch::Avx2Products()
                                      : &small_batch::PortableProducts()) {
  assert(Runs(path));
}

void SmallBatchGemm::Forward(const float* x, size_t n, const float* w, size_t o, size_t i,
                             float* out) {
  assert(n >= 1 && n <= MaxRows(path_));
  products_->forward(x, n, w, o, i, out, &transposed_, &staged_);
}

void SmallBatchGemm::WeightGradient(const float* delta, size_t n, size_t o, const float* x,
                                    size_t i, size_t row_begin, size_t row_end, float* dw) {
  assert(n >= 1 && n <= MaxRows(path_));
  products_->weight_gradient(delta, n, o, x, i, row_begin, row_end, dw, &transposed_, &staged_);
}

void SmallBatchGemm::InputGradient(const float* delta, size_t n, const float* w, size_t o, size_t i,
                                   float* out) {
  assert(n >= 1 && n <= MaxRows(path_));
  products_->input_gradient(delta, n, w, o, i, out, &transposed_, &staged_);
}

namespace small_batch {

namespace {

void ForwardPortable(const float* x, size_t n, const float* w, size_t o, size_t i, float* out,
                     std::vector<float>*, std::vector<float>*) {
  for (size_t r = 0; r < n; ++r) {
    for (size_t j = 0; j < o; ++j) {
      float sum = 0.0f;
      for (size_t c = 0; c < i; ++c) sum = std::fma(w[j * i + c], x[r * i + c], sum);
      out[r * o + j] += sum;
    }
  }
}

void WeightGradientPortable(const float* delta, size_t n, size_t o, const float* x, size_t i,
                            size_t row_begin, size_t row_end, float* dw, std::vector<float>*,
                            std::vector<float>*) {
  for (size_t j = row_begin; j < row_end; ++j) {
    for (size_t c = 0; c < i; ++c) {
      float sum = 0.0f;
      for (size_t r = 0; r < n; ++r) sum = std::fma(delta[r * o + j], x[r * i + c], sum);
      dw[j * i + c] = sum;
    }
  }
}

void InputGradientPortable(const float* delta, size_t n, const float* w, size_t o, size_t i,
                           float* out, std::vector<float>*, std::vector<float>*) {
  for (size_t r = 0; r < n; ++r) {
    for (size_t c = 0; c < i; ++c) {
      float sum = 0.0f;
      for (size_t j = 0; j < o; ++j) sum = std::fma(delta[r * o + j], w[j * i + c], sum);
      out[r * i + c] = sum;
    }
  }
}

}  // namespace

const Products& PortableProducts() {
  static constexpr Products kProducts{&ForwardPortable, &WeightGradientPortable,
                                      &InputGradientPortable};
  return kProducts;
}

}  // namespace small_batch
}  // namespace loco

// SmallBatchGemm (contract: models/small_batch_gemm.h): picks a path and
// holds the plain loops that every path must match bit for bit. The
// vector loops are models/small_batch_gemm_tiles_inl.h.
#include "models/small_batch_gemm.h"

#include <cassert>
#include <cmath>

#include "models/small_batch_gemm_paths.h"

namespace loco {

bool SmallBatchGemm::Runs(Path path) {
#if defined(__x86_64__) && defined(__GNUC__)
  // Facts about the machine, fixed for the process's life.
  static const bool have_avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  }();
  static const bool have_avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
#else
  constexpr bool have_avx512 = false, have_avx2 = false;
#endif
  switch (path) {
    case Path::kAvx512:
      return have_avx512;
    case Path::kAvx2:
      return have_avx2;
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

bool SmallBatchGemm::Suits(size_t n, size_t o, size_t i) {
  return n >= 1 && n <= kMaxRows && o >= 16 && i >= 16 && o * i >= kMinWeights && Available();
}

SmallBatchGemm::SmallBatchGemm(Path path) : path_(path) { assert(Runs(path)); }

void SmallBatchGemm::Forward(const float* x, size_t n, const float* w, size_t o, size_t i,
                             float* out) {
  switch (path_) {
    case Path::kAvx512:
      return small_batch::ForwardAvx512(x, n, w, o, i, out, &transposed_, &staged_);
    case Path::kAvx2:
      return small_batch::ForwardAvx2(x, n, w, o, i, out, &transposed_, &staged_);
    case Path::kPortable:
      return small_batch::ForwardPortable(x, n, w, o, i, out);
  }
}

void SmallBatchGemm::WeightGradient(const float* delta, size_t n, size_t o, const float* x,
                                    size_t i, size_t row_begin, size_t row_end, float* dw) {
  switch (path_) {
    case Path::kAvx512:
      return small_batch::WeightGradientAvx512(delta, n, o, x, i, row_begin, row_end, dw,
                                               &transposed_, &staged_);
    case Path::kAvx2:
      return small_batch::WeightGradientAvx2(delta, n, o, x, i, row_begin, row_end, dw,
                                             &transposed_, &staged_);
    case Path::kPortable:
      return small_batch::WeightGradientPortable(delta, n, o, x, i, row_begin, row_end, dw);
  }
}

void SmallBatchGemm::InputGradient(const float* delta, size_t n, const float* w, size_t o, size_t i,
                                   float* out) {
  switch (path_) {
    case Path::kAvx512:
      return small_batch::InputGradientAvx512(delta, n, w, o, i, out, &transposed_, &staged_);
    case Path::kAvx2:
      return small_batch::InputGradientAvx2(delta, n, w, o, i, out, &transposed_, &staged_);
    case Path::kPortable:
      return small_batch::InputGradientPortable(delta, n, w, o, i, out);
  }
}

namespace small_batch {

void ForwardPortable(const float* x, size_t n, const float* w, size_t o, size_t i, float* out) {
  for (size_t r = 0; r < n; ++r) {
    for (size_t j = 0; j < o; ++j) {
      float sum = 0.0f;
      for (size_t c = 0; c < i; ++c) sum = std::fma(w[j * i + c], x[r * i + c], sum);
      out[r * o + j] += sum;
    }
  }
}

void WeightGradientPortable(const float* delta, size_t n, size_t o, const float* x, size_t i,
                            size_t row_begin, size_t row_end, float* dw) {
  for (size_t j = row_begin; j < row_end; ++j) {
    for (size_t c = 0; c < i; ++c) {
      float sum = 0.0f;
      for (size_t r = 0; r < n; ++r) sum = std::fma(delta[r * o + j], x[r * i + c], sum);
      dw[j * i + c] = sum;
    }
  }
}

void InputGradientPortable(const float* delta, size_t n, const float* w, size_t o, size_t i,
                           float* out) {
  for (size_t r = 0; r < n; ++r) {
    for (size_t c = 0; c < i; ++c) {
      float sum = 0.0f;
      for (size_t j = 0; j < o; ++j) sum = std::fma(delta[r * o + j], w[j * i + c], sum);
      out[r * i + c] = sum;
    }
  }
}

}  // namespace small_batch
}  // namespace loco

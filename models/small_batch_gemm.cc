// The loops behind SmallBatchGemm (contract: models/small_batch_gemm.h).
//
// Each product is tiled so that a tile's partial sums live in zmm registers
// for the whole sum (no horizontal additions), and the weights stream once:
// - Forward: yᵀ[j][r] = Σ_x w[j][x] · xᵀ[x][r]. The batch sits in the lanes
//   (xᵀ padded to 16 or 32 rows); 10 weight rows are broadcast per x.
// - WeightGradient: dw[j][x] = Σ_r delta[r][j] · x[r][x]. 8 rows of dw by 48
//   columns; per r, 3 vectors of x and 8 broadcasts of delta.
// - InputGradient: out[r][x] = Σ_j deltaᵀ[j][r] · w[j][x]. 8 batch rows by
//   48 columns; per j, 3 vectors of w and 8 broadcasts of deltaᵀ. The sum
//   runs over chunks of 32 weight rows (partial sums kept in `out`): a
//   column of w read across all 3072 rows of a large layer would touch a
//   new page per row, and miss the TLB on every load.
// Columns that do not fill a vector are masked: missing lanes load as 0
// and are never stored.
#include "models/small_batch_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/avx512_target.h"

#if LOCO_HAVE_AVX512_TARGET
#define LOCO_HAVE_SMALL_BATCH_PATH 1
#define LOCO_AVX512 __attribute__((target("avx512f,fma")))
#define LOCO_AVX512_INLINE [[gnu::always_inline]] inline LOCO_AVX512
#endif

namespace loco {

bool SmallBatchGemm::Available() {
#if LOCO_HAVE_SMALL_BATCH_PATH
  // A fact about the machine, fixed for the process's life.
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  }();
  return have;
#else
  return false;
#endif
}

bool SmallBatchGemm::Suits(size_t n, size_t o, size_t i) {
  return n >= 1 && n <= kMaxRows && o >= 16 && i >= 16 && o * i >= kMinWeights && Available();
}

#if LOCO_HAVE_SMALL_BATCH_PATH

namespace {

constexpr size_t kLanes = 16;
constexpr int kForwardRows = 10;     // weight rows per forward tile
constexpr int kGradientRows = 8;     // rows of dw, or of the batch, per tile
constexpr int kGradientVectors = 3;  // 16-column vectors per gradient tile
constexpr size_t kInputChunkRows = 32;

LOCO_AVX512_INLINE __mmask16 TailMask(size_t columns) {  // 1 ≤ columns ≤ 16
  return static_cast<__mmask16>((uint32_t{1} << columns) - 1u);
}

// yt[j][·] = Σ_x w[j][x] · xt[x][·] for J rows of w; xt and yt rows are
// NV vectors wide.
template <int J, int NV>
LOCO_AVX512_INLINE void ForwardTile(const float* w, size_t i, const float* xt, float* yt) {
  __m512 acc[J][NV];
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[j][v] = _mm512_setzero_ps();
  }
  for (size_t x = 0; x < i; ++x) {
    __m512 column[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) column[v] = _mm512_loadu_ps(xt + (x * NV + v) * kLanes);
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      const __m512 weight = _mm512_set1_ps(w[static_cast<size_t>(j) * i + x]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[j][v] = _mm512_fmadd_ps(weight, column[v], acc[j][v]);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(yt + (j * NV + v) * kLanes, acc[j][v]);
  }
}

template <int NV>
LOCO_AVX512 void ForwardAll(const float* w, size_t o, size_t i, const float* xt, float* yt) {
  const size_t row_floats = NV * kLanes;
  size_t j = 0;
  for (; j + kForwardRows <= o; j += kForwardRows) {
    ForwardTile<kForwardRows, NV>(w + j * i, i, xt, yt + j * row_floats);
  }
  for (; j < o; ++j) ForwardTile<1, NV>(w + j * i, i, xt, yt + j * row_floats);
}

// The tile both gradients share: A rows of output by XV vectors of columns
// (the last one masked),
//   out[a][·] (+)= Σ_k scalars[k · scalar_stride + a] · vectors[k · vector_stride + ·]
// over k < count, k ascending, from zero (`accumulate` false) or from
// out's partial sums. Output rows are `out_stride` floats apart.
template <int A, int XV>
LOCO_AVX512_INLINE void OuterProductTile(const float* scalars, size_t scalar_stride,
                                         const float* vectors, size_t vector_stride,
                                         size_t count, float* out, size_t out_stride,
                                         __mmask16 last, bool accumulate) {
  __m512 acc[A][XV];
#pragma GCC unroll 16
  for (int a = 0; a < A; ++a) {
#pragma GCC unroll 4
    for (int v = 0; v < XV; ++v) {
      const __mmask16 m = v == XV - 1 ? last : __mmask16{0xFFFF};
      acc[a][v] = accumulate ? _mm512_maskz_loadu_ps(m, out + static_cast<size_t>(a) * out_stride +
                                                            v * kLanes)
                             : _mm512_setzero_ps();
    }
  }
  for (size_t k = 0; k < count; ++k) {
    __m512 row[XV];
#pragma GCC unroll 4
    for (int v = 0; v < XV; ++v) {
      row[v] = _mm512_maskz_loadu_ps(v == XV - 1 ? last : __mmask16{0xFFFF},
                                     vectors + k * vector_stride + v * kLanes);
    }
#pragma GCC unroll 16
    for (int a = 0; a < A; ++a) {
      const __m512 s = _mm512_set1_ps(scalars[k * scalar_stride + static_cast<size_t>(a)]);
#pragma GCC unroll 4
      for (int v = 0; v < XV; ++v) acc[a][v] = _mm512_fmadd_ps(s, row[v], acc[a][v]);
    }
  }
#pragma GCC unroll 16
  for (int a = 0; a < A; ++a) {
#pragma GCC unroll 4
    for (int v = 0; v < XV; ++v) {
      _mm512_mask_storeu_ps(out + static_cast<size_t>(a) * out_stride + v * kLanes,
                            v == XV - 1 ? last : __mmask16{0xFFFF}, acc[a][v]);
    }
  }
}

// dw[j][·] = Σ_r delta[r][j] · x[r][·] for J rows (delta and dw start at
// the first of them).
template <int J>
LOCO_AVX512 void WeightGradientRows(const float* delta, size_t o, const float* x, size_t i,
                                    size_t n, float* dw) {
  constexpr size_t kTile = kGradientVectors * kLanes;
  size_t c = 0;
  for (; c + kTile <= i; c += kTile) {
    OuterProductTile<J, kGradientVectors>(delta, o, x + c, i, n, dw + c, i, 0xFFFF, false);
  }
  for (; c < i; c += kLanes) {
    OuterProductTile<J, 1>(delta, o, x + c, i, n, dw + c, i, TailMask(std::min(kLanes, i - c)),
                           false);
  }
}

// out[r][·] (+)= Σ_j delta_t[j][r] · w[j][·] over `rows` rows of w, for R
// batch rows from column c on; `first`: from zero instead of out's partial
// sums.
template <int R>
LOCO_AVX512 void InputGradientColumns(const float* delta_t, size_t n, const float* w,
                                      size_t rows, size_t i, size_t c, float* out, bool first) {
  if (c + kGradientVectors * kLanes <= i) {
    OuterProductTile<R, kGradientVectors>(delta_t, n, w + c, i, rows, out + c, i, 0xFFFF,
                                          !first);
  } else {
    OuterProductTile<R, 1>(delta_t, n, w + c, i, rows, out + c, i,
                           TailMask(std::min(kLanes, i - c)), !first);
  }
}

LOCO_AVX512 void InputGradientAll(const float* delta_t, size_t n, const float* w, size_t o,
                                  size_t i, float* out) {
  constexpr size_t kTile = kGradientVectors * kLanes;
  for (size_t j0 = 0; j0 < o; j0 += kInputChunkRows) {
    const size_t rows = std::min(kInputChunkRows, o - j0);
    const float* chunk = w + j0 * i;
    const float* chunk_delta_t = delta_t + j0 * n;
    const bool first = j0 == 0;
    for (size_t c = 0; c < i; c += c + kTile <= i ? kTile : kLanes) {
      size_t r = 0;
      for (; r + kGradientRows <= n; r += kGradientRows) {
        InputGradientColumns<kGradientRows>(chunk_delta_t + r, n, chunk, rows, i, c, out + r * i,
                                            first);
      }
      for (; r < n; ++r) {
        InputGradientColumns<1>(chunk_delta_t + r, n, chunk, rows, i, c, out + r * i, first);
      }
    }
  }
}

}  // namespace

void SmallBatchGemm::Forward(const float* x, size_t n, const float* w, size_t o, size_t i,
                                 float* out) {
  const size_t lanes = n <= kLanes ? kLanes : 2 * kLanes;
  transposed_.assign(i * lanes, 0.0f);
  for (size_t r = 0; r < n; ++r) {
    for (size_t c = 0; c < i; ++c) transposed_[c * lanes + r] = x[r * i + c];
  }
  staged_.resize(o * lanes);
  if (lanes == kLanes) {
    ForwardAll<1>(w, o, i, transposed_.data(), staged_.data());
  } else {
    ForwardAll<2>(w, o, i, transposed_.data(), staged_.data());
  }
  for (size_t r = 0; r < n; ++r) {
    for (size_t j = 0; j < o; ++j) out[r * o + j] += staged_[j * lanes + r];
  }
}

void SmallBatchGemm::WeightGradient(const float* delta, size_t n, size_t o, const float* x,
                                        size_t i, size_t row_begin, size_t row_end, float* dw) {
  size_t j = row_begin;
  for (; j + kGradientRows <= row_end; j += kGradientRows) {
    WeightGradientRows<kGradientRows>(delta + j, o, x, i, n, dw + j * i);
  }
  for (; j < row_end; ++j) WeightGradientRows<1>(delta + j, o, x, i, n, dw + j * i);
}

void SmallBatchGemm::InputGradient(const float* delta, size_t n, const float* w, size_t o,
                                       size_t i, float* out) {
  transposed_.resize(o * n);
  for (size_t r = 0; r < n; ++r) {
    for (size_t j = 0; j < o; ++j) transposed_[j * n + r] = delta[r * o + j];
  }
  InputGradientAll(transposed_.data(), n, w, o, i, out);
}

#else  // No AVX-512 path in this build: Suits() is false and Mlp never calls
       // these; they keep the contract with plain loops, in the same order.

void SmallBatchGemm::Forward(const float* x, size_t n, const float* w, size_t o, size_t i,
                                 float* out) {
  for (size_t r = 0; r < n; ++r) {
    for (size_t j = 0; j < o; ++j) {
      float sum = 0.0f;
      for (size_t c = 0; c < i; ++c) sum = std::fma(w[j * i + c], x[r * i + c], sum);
      out[r * o + j] += sum;
    }
  }
}

void SmallBatchGemm::WeightGradient(const float* delta, size_t n, size_t o, const float* x,
                                        size_t i, size_t row_begin, size_t row_end, float* dw) {
  for (size_t j = row_begin; j < row_end; ++j) {
    for (size_t c = 0; c < i; ++c) {
      float sum = 0.0f;
      for (size_t r = 0; r < n; ++r) sum = std::fma(delta[r * o + j], x[r * i + c], sum);
      dw[j * i + c] = sum;
    }
  }
}

void SmallBatchGemm::InputGradient(const float* delta, size_t n, const float* w, size_t o,
                                       size_t i, float* out) {
  for (size_t r = 0; r < n; ++r) {
    for (size_t c = 0; c < i; ++c) {
      float sum = 0.0f;
      for (size_t j = 0; j < o; ++j) sum = std::fma(delta[r * o + j], w[j * i + c], sum);
      out[r * i + c] = sum;
    }
  }
}

#endif

}  // namespace loco

// The vector loops of SmallBatchGemm (contract: models/small_batch_gemm.h),
// written once over an ISA's few operations (GemmAvx512 in
// small_batch_gemm_avx512.cc, GemmYmm in small_batch_gemm_isa_ymm_inl.h) and
// instantiated by small_batch_gemm_avx512.cc and small_batch_gemm_avx2.cc.
// Internal to models/.
//
// The including file defines LOCO_SIMD_TARGET, its ISA's target
// attribute, and includes this header after every other one. Every
// function is a template over the ISA, so the two files' instances are
// distinct and never meet at link time.
//
// Each product is tiled so that a tile's partial sums live in registers
// for the whole sum (no horizontal additions), and the weights stream once:
// - Forward: yᵀ[j][r] = Σ_x w[j][x] · xᵀ[x][r]. The batch sits in the lanes
//   (xᵀ padded to NV vectors: 1, 2 or 4); Isa::ForwardRows(NV) weight rows
//   are broadcast per x.
// - WeightGradient: dw[j][x] = Σ_r delta[r][j] · x[r][x]. Isa::kTileRows
//   rows of dw by Isa::kTileVectors vectors of columns; per r, the vectors
//   of x and one broadcast of delta per row, from copies laid out so that
//   a tile reads a few contiguous lines (deltaᵀ, and x in column panels):
//   read in place, its n rows of 4 KiB-multiple strides (3072 floats) all
//   fall in one L1 set and evict each other, which made this product
//   three times slower on a Zen 3.
// - InputGradient: out[r][x] = Σ_j deltaᵀ[j][r] · w[j][x], the same tile
//   with batch rows for rows and w for vectors. The sum runs over chunks
//   of Isa::kInputChunkRows weight rows (partial sums kept in a packed
//   copy of `out`): a column of w read across all 3072 rows of a large
//   layer would touch a new page per row, and miss the TLB on every load.
// Columns that do not fill a vector are masked: missing lanes load as 0
// and are never stored. Every sum runs over its index in ascending order
// by fused multiply-adds from zero, so the ISAs' results, and the plain
// loops of small_batch_gemm.cc, are the same bits.
//
// An Isa provides: Vec, Mask, kLanes, kTileRows, kTileVectors,
// ForwardRows(nv), Zero(), Broadcast(f), Fma(a, b, acc), Load(p),
// Store(p, v), FullMask(), TailMask(columns) (1 ≤ columns ≤ kLanes),
// MaskedLoad(m, p) (masked lanes 0) and MaskedStore(p, m, v).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#ifndef LOCO_SIMD_TARGET
#error "define LOCO_SIMD_TARGET (the ISA's target attribute) before including this header"
#endif
#define LOCO_SIMD_INLINE inline __attribute__((always_inline)) LOCO_SIMD_TARGET

namespace loco::small_batch {

// yt[j][·] = Σ_x w[j][x] · xt[x][·] for J rows of w; xt and yt rows are
// NV vectors wide.
template <class Isa, int J, int NV>
LOCO_SIMD_INLINE void ForwardTile(const float* w, size_t i, const float* xt, float* yt) {
  typename Isa::Vec acc[J][NV];
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[j][v] = Isa::Zero();
  }
  for (size_t x = 0; x < i; ++x) {
    typename Isa::Vec column[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) column[v] = Isa::Load(xt + (x * NV + v) * Isa::kLanes);
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      const auto weight = Isa::Broadcast(w[static_cast<size_t>(j) * i + x]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[j][v] = Isa::Fma(weight, column[v], acc[j][v]);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) Isa::Store(yt + (j * NV + v) * Isa::kLanes, acc[j][v]);
  }
}

template <class Isa, int NV>
LOCO_SIMD_TARGET void ForwardAll(const float* w, size_t o, size_t i, const float* xt, float* yt) {
  constexpr int kRows = Isa::ForwardRows(NV);
  const size_t row_floats = NV * Isa::kLanes;
  size_t j = 0;
  for (; j + kRows <= o; j += kRows) {
    ForwardTile<Isa, kRows, NV>(w + j * i, i, xt, yt + j * row_floats);
  }
  for (; j < o; ++j) ForwardTile<Isa, 1, NV>(w + j * i, i, xt, yt + j * row_floats);
}

// A whole vector, or with `masked` its lanes under `m` (the others 0).
// Whole vectors load plainly: AVX2's masked moves cost more. `masked` is
// a constant wherever this is inlined.
template <class Isa>
LOCO_SIMD_INLINE typename Isa::Vec LoadPart(bool masked, typename Isa::Mask m, const float* p) {
  return masked ? Isa::MaskedLoad(m, p) : Isa::Load(p);
}

// The tile both gradients share: A rows of output by XV vectors of columns
// (with kTail, the last one masked by `last`),
//   out[a][·] (+)= Σ_k scalars[k · k_stride + a · a_stride] · vectors[k · vector_stride + ·]
// over k < count, k ascending, from zero (`accumulate` false) or from
// out's partial sums. Output rows are `out_stride` floats apart.
template <class Isa, int A, int XV, bool kTail>
LOCO_SIMD_INLINE void OuterProductTile(const float* scalars, size_t k_stride, size_t a_stride,
                                       const float* vectors, size_t vector_stride, size_t count,
                                       float* out, size_t out_stride, typename Isa::Mask last,
                                       bool accumulate) {
  typename Isa::Vec acc[A][XV];
#pragma GCC unroll 16
  for (int a = 0; a < A; ++a) {
#pragma GCC unroll 4
    for (int v = 0; v < XV; ++v) {
      acc[a][v] = accumulate
                      ? LoadPart<Isa>(kTail && v == XV - 1, last,
                                      out + static_cast<size_t>(a) * out_stride + v * Isa::kLanes)
                      : Isa::Zero();
    }
  }
  for (size_t k = 0; k < count; ++k) {
    typename Isa::Vec row[XV];
#pragma GCC unroll 4
    for (int v = 0; v < XV; ++v) {
      row[v] =
          LoadPart<Isa>(kTail && v == XV - 1, last, vectors + k * vector_stride + v * Isa::kLanes);
    }
#pragma GCC unroll 16
    for (int a = 0; a < A; ++a) {
      const auto s = Isa::Broadcast(scalars[k * k_stride + static_cast<size_t>(a) * a_stride]);
#pragma GCC unroll 4
      for (int v = 0; v < XV; ++v) acc[a][v] = Isa::Fma(s, row[v], acc[a][v]);
    }
  }
#pragma GCC unroll 16
  for (int a = 0; a < A; ++a) {
#pragma GCC unroll 4
    for (int v = 0; v < XV; ++v) {
      float* p = out + static_cast<size_t>(a) * out_stride + v * Isa::kLanes;
      if (kTail && v == XV - 1) {
        Isa::MaskedStore(p, last, acc[a][v]);
      } else {
        Isa::Store(p, acc[a][v]);
      }
    }
  }
}

// dw[j][·] = Σ_r delta_t[j][r] · x[r][·] for J rows (delta_t and dw start
// at the first of them), x packed by PackPanels.
template <class Isa, int J>
LOCO_SIMD_TARGET void WeightGradientRows(const float* delta_t, size_t n, const float* packed_x,
                                         size_t i, float* dw) {
  constexpr size_t kTile = Isa::kTileVectors * Isa::kLanes;
  size_t c = 0;
  for (; c + kTile <= i; c += kTile) {
    OuterProductTile<Isa, J, Isa::kTileVectors, false>(delta_t, 1, n, packed_x + c * n, kTile, n,
                                                       dw + c, i, Isa::FullMask(), false);
  }
  for (; c < i; c += Isa::kLanes) {
    OuterProductTile<Isa, J, 1, true>(delta_t, 1, n, packed_x + c * n, Isa::kLanes, n, dw + c, i,
                                      Isa::TailMask(std::min(Isa::kLanes, i - c)), false);
  }
}

// out[r][·] (+)= Σ_j delta_t[j][r] · w[j][·] over `rows` rows of w, for R
// batch rows of the panel at column c (`panel`: the panel's first row,
// `width` floats per row, as PackPanels lays them out); `first`: from zero
// instead of the panel's partial sums.
template <class Isa, int R>
LOCO_SIMD_TARGET void InputGradientColumns(const float* delta_t, size_t n, const float* w,
                                           size_t rows, size_t i, size_t c, float* panel,
                                           size_t width, bool first) {
  if (width == Isa::kTileVectors * Isa::kLanes) {
    OuterProductTile<Isa, R, Isa::kTileVectors, false>(delta_t, n, 1, w + c, i, rows, panel, width,
                                                       Isa::FullMask(), !first);
  } else {
    OuterProductTile<Isa, R, 1, true>(delta_t, n, 1, w + c, i, rows, panel, width,
                                      Isa::TailMask(std::min(Isa::kLanes, i - c)), !first);
  }
}

// The sum runs over chunks of Isa::kInputChunkRows rows of w, each chunk's
// partial sums kept in `packed_out` (PackPanels' layout, so that a tile's
// rows are contiguous): n rows of out i floats apart, like a chunk's rows
// of w, would fall in one L1 set when i is a multiple of 1024.
template <class Isa>
LOCO_SIMD_TARGET void InputGradientAll(const float* delta_t, size_t n, const float* w, size_t o,
                                       size_t i, float* packed_out) {
  constexpr size_t kTile = Isa::kTileVectors * Isa::kLanes;
  for (size_t j0 = 0; j0 < o; j0 += Isa::kInputChunkRows) {
    const size_t rows = std::min(Isa::kInputChunkRows, o - j0);
    const float* chunk = w + j0 * i;
    const float* chunk_delta_t = delta_t + j0 * n;
    const bool first = j0 == 0;
    for (size_t c = 0; c < i;) {
      const size_t width = c + kTile <= i ? kTile : Isa::kLanes;
      float* panel = packed_out + c * n;
      size_t r = 0;
      for (; r + Isa::kTileRows <= n; r += Isa::kTileRows) {
        InputGradientColumns<Isa, Isa::kTileRows>(chunk_delta_t + r, n, chunk, rows, i, c,
                                                  panel + r * width, width, first);
      }
      for (; r < n; ++r) {
        InputGradientColumns<Isa, 1>(chunk_delta_t + r, n, chunk, rows, i, c, panel + r * width,
                                     width, first);
      }
      c += width;
    }
  }
}

// The three products, with the transposes around the loops. `transposed`
// and `staged` are the caller's scratch (resized here).
template <class Isa>
void Forward(const float* x, size_t n, const float* w, size_t o, size_t i, float* out,
             std::vector<float>* transposed, std::vector<float>* staged) {
  // n ≤ 4 vectors of lanes (SmallBatchGemm::MaxRows).
  const size_t nv = n <= Isa::kLanes ? 1 : n <= 2 * Isa::kLanes ? 2 : 4;
  const size_t lanes = nv * Isa::kLanes;
  transposed->assign(i * lanes, 0.0f);
  for (size_t r = 0; r < n; ++r) {
    for (size_t c = 0; c < i; ++c) (*transposed)[c * lanes + r] = x[r * i + c];
  }
  staged->resize(o * lanes);
  if (nv == 1) {
    ForwardAll<Isa, 1>(w, o, i, transposed->data(), staged->data());
  } else if (nv == 2) {
    ForwardAll<Isa, 2>(w, o, i, transposed->data(), staged->data());
  } else {
    ForwardAll<Isa, 4>(w, o, i, transposed->data(), staged->data());
  }
  for (size_t r = 0; r < n; ++r) {
    for (size_t j = 0; j < o; ++j) out[r * o + j] += (*staged)[j * lanes + r];
  }
}

// x [n × i] as the column panels the weight gradient's tiles read: the
// whole tiles' panels (kTileVectors vectors wide), then one vector wide,
// each panel's n rows contiguous, and the last panel padded with zeros.
// Read in place, n rows i floats apart would fall in one L1 set whenever
// i is a multiple of 1024 (as 3072 is), and evict each other.
template <class Isa>
void PackPanels(const float* x, size_t n, size_t i, std::vector<float>* packed) {
  constexpr size_t kTile = Isa::kTileVectors * Isa::kLanes;
  const size_t padded = (i + Isa::kLanes - 1) / Isa::kLanes * Isa::kLanes;
  packed->assign(padded * n, 0.0f);
  for (size_t c = 0; c < i;) {
    const size_t width = c + kTile <= i ? kTile : Isa::kLanes;
    const size_t valid = std::min(width, i - c);
    float* panel = packed->data() + c * n;
    for (size_t r = 0; r < n; ++r) std::copy_n(x + r * i + c, valid, panel + r * width);
    c += width;
  }
}

template <class Isa>
void WeightGradient(const float* delta, size_t n, size_t o, const float* x, size_t i,
                    size_t row_begin, size_t row_end, float* dw, std::vector<float>* transposed,
                    std::vector<float>* packed_x) {
  // deltaᵀ's rows for the range: a tile's scalars in a few lines, not n
  // rows o floats apart (the same L1 set, as above).
  const size_t rows = row_end - row_begin;
  transposed->resize(rows * n);
  for (size_t r = 0; r < n; ++r) {
    for (size_t j = 0; j < rows; ++j) (*transposed)[j * n + r] = delta[r * o + row_begin + j];
  }
  PackPanels<Isa>(x, n, i, packed_x);
  const float* delta_t = transposed->data();
  size_t j = 0;
  for (; j + Isa::kTileRows <= rows; j += Isa::kTileRows) {
    WeightGradientRows<Isa, Isa::kTileRows>(delta_t + j * n, n, packed_x->data(), i,
                                            dw + (row_begin + j) * i);
  }
  for (; j < rows; ++j) {
    WeightGradientRows<Isa, 1>(delta_t + j * n, n, packed_x->data(), i, dw + (row_begin + j) * i);
  }
}

template <class Isa>
void InputGradient(const float* delta, size_t n, const float* w, size_t o, size_t i, float* out,
                   std::vector<float>* transposed, std::vector<float>* staged) {
  transposed->resize(o * n);
  for (size_t r = 0; r < n; ++r) {
    for (size_t j = 0; j < o; ++j) (*transposed)[j * n + r] = delta[r * o + j];
  }
  constexpr size_t kTile = Isa::kTileVectors * Isa::kLanes;
  staged->resize((i + Isa::kLanes - 1) / Isa::kLanes * Isa::kLanes * n);
  InputGradientAll<Isa>(transposed->data(), n, w, o, i, staged->data());
  for (size_t c = 0; c < i;) {  // out from the panels
    const size_t width = c + kTile <= i ? kTile : Isa::kLanes;
    const size_t valid = std::min(width, i - c);
    const float* panel = staged->data() + c * n;
    for (size_t r = 0; r < n; ++r) std::copy_n(panel + r * width, valid, out + r * i + c);
    c += width;
  }
}

}  // namespace loco::small_batch

#undef LOCO_SIMD_INLINE

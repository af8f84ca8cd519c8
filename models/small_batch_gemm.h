// SmallBatchGemm: the three matrix products of a dense layer's step
// (forward, weight gradient, input gradient) for batches of a few rows, on
// AVX-512 or AVX2 with FMA, reading the weights in place.
//
// Why not OpenBLAS here: for every product it first copies ("packs") the
// whole weight matrix into its panel layout, and before a weight gradient
// (beta = 0) it zero-fills the output it is about to overwrite. At 16 rows
// those copies cost as much as the arithmetic: for a 3072 × 3072 layer each
// product takes it about twice as long as these loops, which read the
// weights once, as vectors or broadcasts, and keep the batch's side in L1
// and L2 (bench/README.md, "A worker's step on the CPU"). With more rows
// its packed kernels catch up: on AVX2 from about 32 rows, on AVX-512 (a
// Zen 4) every product was still 1.1-1.6 times faster at 64; hence
// MaxRows.
//
// Every output element is one sum in a fixed order (ascending over the
// summed index, fused multiply-adds from zero), whatever the path, the
// tiling or the rows asked for: the AVX-512 path, the AVX2 path and the
// plain loops give the same bits, and a panel of rows of a weight gradient
// is, bit for bit, those rows of the whole. Results differ from OpenBLAS's
// only by rounding (float sums in another order);
// tests/models/small_batch_gemm_test.cc checks each path against
// double-precision sums within the bound it states, and against the plain
// loops bit for bit.
//
// Layout: row-major, PyTorch's nn.Linear: weights w [o × i], a batch of n
// inputs x [n × i], outputs [n × o].
//
// Not thread-safe: an object keeps scratch for transposed operands; use
// one per thread (Mlp keeps one).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace loco {
namespace small_batch {
struct Products;  // models/small_batch_gemm_paths.h
}

class SmallBatchGemm {
 public:
  // Which loops run the products: the vector paths, or the plain loops
  // (the reference the tests hold the others to; far too slow for
  // training).
  enum class Path { kAvx512, kAvx2, kPortable };

  // The most rows any path takes (MaxRows(kAvx512), MaxRows(kPortable)).
  static constexpr size_t kMaxRows = 64;
  // Smaller weight matrices stay with OpenBLAS: there the transposes these
  // products need are not repaid.
  static constexpr size_t kMinWeights = size_t{1} << 16;

  // True when this CPU runs `path`: AVX-512 (F, BW, VL, DQ) with FMA, or
  // AVX2 with FMA, as kernels/cpu_features.h checks them once; kPortable
  // always.
  static bool Runs(Path path);
  // The fastest path this CPU runs.
  static Path BestPath();
  // True when a vector path runs here (BestPath() is not kPortable).
  static bool Available();
  // The most rows `path` takes: 64 on AVX-512 and for the plain loops, 32
  // on AVX2 (its forward holds the batch in at most 4 vectors of 8 lanes).
  static size_t MaxRows(Path path);
  // `path`'s name ("avx512", "avx2", "portable"); for AVX-512 also the
  // width its forward of at most 8 rows runs on here, e.g. "avx512 (a
  // forward of at most 8 rows on zmm)". For logs and benchmarks.
  static std::string Describe(Path path);
  // True when these products are available and meant for the shape:
  // 1 ≤ n ≤ MaxRows(BestPath()), o ≥ 16, i ≥ 16 and o·i ≥ kMinWeights.
  static bool Suits(size_t n, size_t o, size_t i);

  // Precondition: Runs(path).
  explicit SmallBatchGemm(Path path = BestPath());
  Path path() const { return path_; }

  // Preconditions for the three: 1 ≤ n ≤ MaxRows(path()) (Suits says when
  // they beat OpenBLAS); no output overlaps an input.

  // out[n × o] += x[n × i] · wᵀ (out holds, e.g., the bias).
  void Forward(const float* x, size_t n, const float* w, size_t o, size_t i, float* out);
  // Rows [row_begin, row_end) of the weight gradient dw [o × i]:
  // dw[j][·] = Σ_r delta[r][j] · x[r][·], with delta [n × o]. Rows outside
  // the range are not touched. Precondition: row_begin ≤ row_end ≤ o.
  void WeightGradient(const float* delta, size_t n, size_t o, const float* x, size_t i,
                      size_t row_begin, size_t row_end, float* dw);
  // out[n × i] = delta[n × o] · w.
  void InputGradient(const float* delta, size_t n, const float* w, size_t o, size_t i,
                     float* out);

 private:
  Path path_;
  const small_batch::Products* products_;  // path_'s; static, never null
  std::vector<float> transposed_;  // xᵀ with the batch padded to whole vectors, or deltaᵀ
  std::vector<float> staged_;      // the forward product, transposed
};

}  // namespace loco

// SmallBatchGemm's vector paths against double-precision sums of the same
// products, and against the plain loops bit for bit (every path sums each
// element in the same order, models/small_batch_gemm.h). Each test runs
// once per vector path this CPU runs; the others skip.
//
// Tolerance: every output is a float sum of k products, each added by one
// fused multiply-add, so |got − exact| ≤ γ_k · Σ|terms| with γ_k ≈ k·2⁻²⁴
// (and one more rounding for the forward's addition to `out`). The tests
// allow twice that, (k + 2)·2⁻²³ · (Σ|aᵢbᵢ| + |out₀|): a product that
// reads a wrong element, lane or row misses it by the size of a term.
#include "models/small_batch_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu_features.h"
#include "models/small_batch_gemm_paths.h"
#include "tests/common/random_batch.h"
#include "tests/common/same_bits.h"

namespace loco {
namespace {

double Tolerance(size_t k, double abs_sum) {
  return static_cast<double>(k + 2) * 0x1.0p-23 * abs_sum;
}

// got[row · cols + col] against start(row, col) + Σ_k term(row, col, k)
// over k < count, summed in double, within Tolerance(count, |start| +
// Σ|term|). Stops at the first element out of it.
template <typename Start, typename Term>
void ExpectNearExactSums(const std::vector<float>& got, size_t rows, size_t cols, size_t count,
                         Start start, Term term) {
  for (size_t row = 0; row < rows; ++row) {
    for (size_t col = 0; col < cols; ++col) {
      double exact = start(row, col), abs_sum = std::abs(exact);
      for (size_t k = 0; k < count; ++k) {
        const double t = term(row, col, k);
        exact += t;
        abs_sum += std::abs(t);
      }
      ASSERT_NEAR(got[row * cols + col], exact, Tolerance(count, abs_sum))
          << "row " << row << " col " << col;
    }
  }
}

struct Shape {
  size_t n, o, i;
};

std::string Name(const Shape& s) {
  return "n=" + std::to_string(s.n) + " o=" + std::to_string(s.o) + " i=" + std::to_string(s.i);
}

// Batches of 1 to kMaxRows rows that fill 1, 2 or 4 vectors of lanes of
// either width, or pad the last; column counts that fill whole tiles, whole
// vectors and part of one; row counts that fill tiles and leave tails. A
// path takes those of at most MaxRows(path) rows (TakenBy).
const Shape kShapes[] = {{1, 300, 257},  {5, 64, 1024},  {8, 701, 96},   {9, 263, 250},
                         {16, 1030, 70}, {16, 256, 768}, {17, 300, 257}, {24, 257, 300},
                         {32, 129, 531}, {33, 300, 257}, {40, 257, 300}, {64, 263, 531}};

bool TakenBy(SmallBatchGemm::Path path, const Shape& s) {
  return s.n <= SmallBatchGemm::MaxRows(path);
}

using Path = SmallBatchGemm::Path;

std::string PathName(const ::testing::TestParamInfo<Path>& info) {
  return info.param == Path::kAvx512 ? "Avx512" : "Avx2";
}

void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& reference) {
  ASSERT_EQ(got.size(), reference.size());
  for (size_t k = 0; k < got.size(); ++k) {
    if (!SameBits(got[k], reference[k])) {
      FAIL() << "element " << k << ": " << got[k] << " vs the plain loops' " << reference[k];
    }
  }
}

class SmallBatchGemmTest : public ::testing::TestWithParam<Path> {
 protected:
  void SetUp() override {
    if (!SmallBatchGemm::Runs(GetParam())) GTEST_SKIP() << "this CPU does not run the path";
  }
  SmallBatchGemm products_{SmallBatchGemm::Runs(GetParam()) ? GetParam() : Path::kPortable};
  SmallBatchGemm reference_{Path::kPortable};
};

TEST_P(SmallBatchGemmTest, ForwardAddsTheProductToWhatOutHolds) {
  for (const Shape& s : kShapes) {
    if (!TakenBy(GetParam(), s)) continue;
    SCOPED_TRACE(Name(s));
    if (GetParam() == SmallBatchGemm::BestPath()) {
      ASSERT_TRUE(SmallBatchGemm::Suits(s.n, s.o, s.i));
    }
    const std::vector<float> x = Gaussian(s.n * s.i, 1), w = Gaussian(s.o * s.i, 2);
    const std::vector<float> bias = Gaussian(s.n * s.o, 3);
    std::vector<float> out = bias, reference = bias;
    products_.Forward(x.data(), s.n, w.data(), s.o, s.i, out.data());
    reference_.Forward(x.data(), s.n, w.data(), s.o, s.i, reference.data());
    ASSERT_NO_FATAL_FAILURE(ExpectSameBits(out, reference));
    ASSERT_NO_FATAL_FAILURE(ExpectNearExactSums(
        out, s.n, s.o, s.i, [&](size_t r, size_t j) -> double { return bias[r * s.o + j]; },
        [&](size_t r, size_t j, size_t c) {
          return static_cast<double>(w[j * s.i + c]) * x[r * s.i + c];
        }));
  }
}

TEST_P(SmallBatchGemmTest, WeightGradientIsDeltaTransposedTimesInputs) {
  for (const Shape& s : kShapes) {
    if (!TakenBy(GetParam(), s)) continue;
    SCOPED_TRACE(Name(s));
    const std::vector<float> delta = Gaussian(s.n * s.o, 4), x = Gaussian(s.n * s.i, 5);
    std::vector<float> dw(s.o * s.i, std::numeric_limits<float>::quiet_NaN()), reference = dw;
    products_.WeightGradient(delta.data(), s.n, s.o, x.data(), s.i, 0, s.o, dw.data());
    reference_.WeightGradient(delta.data(), s.n, s.o, x.data(), s.i, 0, s.o, reference.data());
    ASSERT_NO_FATAL_FAILURE(ExpectSameBits(dw, reference));
    ASSERT_NO_FATAL_FAILURE(ExpectNearExactSums(
        dw, s.o, s.i, s.n, [](size_t, size_t) { return 0.0; },
        [&](size_t j, size_t c, size_t r) {
          return static_cast<double>(delta[r * s.o + j]) * x[r * s.i + c];
        }));
  }
}

// Mlp computes a weight gradient in panels of rows and must get the same
// bits as in one piece; rows outside a panel stay as they were.
TEST_P(SmallBatchGemmTest, WeightGradientPanelsAreTheWholeBitForBit) {
  const Shape s{16, 1030, 70};
  const std::vector<float> delta = Gaussian(s.n * s.o, 6), x = Gaussian(s.n * s.i, 7);
  std::vector<float> whole(s.o * s.i);
  products_.WeightGradient(delta.data(), s.n, s.o, x.data(), s.i, 0, s.o, whole.data());
  for (const auto& [begin, end] : {std::pair<size_t, size_t>{0, 1}, {3, 11}, {8, 16}, {1021, 1030},
                                   {500, 500}}) {
    SCOPED_TRACE(std::to_string(begin) + ".." + std::to_string(end));
    std::vector<float> panel(s.o * s.i, std::numeric_limits<float>::quiet_NaN());
    products_.WeightGradient(delta.data(), s.n, s.o, x.data(), s.i, begin, end, panel.data());
    EXPECT_EQ(std::memcmp(panel.data() + begin * s.i, whole.data() + begin * s.i,
                          (end - begin) * s.i * sizeof(float)),
              0);
    size_t untouched = 0;
    for (size_t k = 0; k < panel.size(); ++k) {
      if (k < begin * s.i || k >= end * s.i) untouched += std::isnan(panel[k]) ? 1 : 0;
    }
    EXPECT_EQ(untouched, (s.o - (end - begin)) * s.i);
  }
}

TEST_P(SmallBatchGemmTest, InputGradientIsDeltaTimesWeights) {
  for (const Shape& s : kShapes) {
    if (!TakenBy(GetParam(), s)) continue;
    SCOPED_TRACE(Name(s));
    const std::vector<float> delta = Gaussian(s.n * s.o, 8), w = Gaussian(s.o * s.i, 9);
    // Garbage in the output first: every element must be written, not added to.
    std::vector<float> out = Gaussian(s.n * s.i, 10), reference(s.n * s.i);
    products_.InputGradient(delta.data(), s.n, w.data(), s.o, s.i, out.data());
    reference_.InputGradient(delta.data(), s.n, w.data(), s.o, s.i, reference.data());
    ASSERT_NO_FATAL_FAILURE(ExpectSameBits(out, reference));
    ASSERT_NO_FATAL_FAILURE(ExpectNearExactSums(
        out, s.n, s.i, s.o, [](size_t, size_t) { return 0.0; },
        [&](size_t r, size_t c, size_t j) {
          return static_cast<double>(delta[r * s.o + j]) * w[j * s.i + c];
        }));
  }
}

// One object serves layers of different shapes in turn (its scratch is
// resized, not assumed): the answers do not depend on what ran before.
TEST_P(SmallBatchGemmTest, ScratchReuseAcrossShapesChangesNothing) {
  const Shape a{32, 129, 531}, b{3, 300, 257};
  const std::vector<float> xa = Gaussian(a.n * a.i, 11), wa = Gaussian(a.o * a.i, 12);
  const std::vector<float> xb = Gaussian(b.n * b.i, 13), wb = Gaussian(b.o * b.i, 14);
  std::vector<float> fresh(b.n * b.o, 0.0f), reused(b.n * b.o, 0.0f), ya(a.n * a.o, 0.0f);
  SmallBatchGemm other(GetParam());
  other.Forward(xb.data(), b.n, wb.data(), b.o, b.i, fresh.data());
  products_.Forward(xa.data(), a.n, wa.data(), a.o, a.i, ya.data());
  products_.Forward(xb.data(), b.n, wb.data(), b.o, b.i, reused.data());
  EXPECT_EQ(std::memcmp(fresh.data(), reused.data(), fresh.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(VectorPaths, SmallBatchGemmTest,
                         ::testing::Values(Path::kAvx512, Path::kAvx2), PathName);

// The AVX-512 forward of at most 8 rows runs on ymm or on zmm by the CPU
// (Avx512SplitsZmm); each choice is checked here whatever this CPU makes,
// bit for bit against the plain loops, on batches below, at and past 8.
TEST(SmallBatchGemmAvx512, ForwardOnYmmAndOnZmmAreThePlainLoopsBitForBit) {
  if (!SmallBatchGemm::Runs(Path::kAvx512)) GTEST_SKIP() << "this CPU does not run AVX-512";
  EXPECT_EQ(&small_batch::Avx512Products(),
            &small_batch::Avx512ProductsWith(cpu::detail::Avx512SplitsZmm()));
  for (const bool on_ymm : {true, false}) {
    const small_batch::Products& products = small_batch::Avx512ProductsWith(on_ymm);
    for (const Shape& s :
         {Shape{1, 300, 257}, Shape{5, 64, 1024}, Shape{8, 701, 96}, Shape{9, 263, 250}}) {
      SCOPED_TRACE(Name(s) + (on_ymm ? " on ymm" : " on zmm"));
      const std::vector<float> x = Gaussian(s.n * s.i, 4), w = Gaussian(s.o * s.i, 5);
      std::vector<float> out = Gaussian(s.n * s.o, 6), reference = out;
      std::vector<float> transposed, staged;
      products.forward(x.data(), s.n, w.data(), s.o, s.i, out.data(), &transposed, &staged);
      small_batch::PortableProducts().forward(x.data(), s.n, w.data(), s.o, s.i, reference.data(),
                                              &transposed, &staged);
      ASSERT_NO_FATAL_FAILURE(ExpectSameBits(out, reference));
    }
  }
}

TEST(SmallBatchGemmPaths, TheBestPathIsTheWidestThisCpuRuns) {
  EXPECT_TRUE(SmallBatchGemm::Runs(Path::kPortable));
  const Path best = SmallBatchGemm::BestPath();
  EXPECT_TRUE(SmallBatchGemm::Runs(best));
  if (SmallBatchGemm::Runs(Path::kAvx512)) {
    EXPECT_EQ(best, Path::kAvx512);
  } else if (SmallBatchGemm::Runs(Path::kAvx2)) {
    EXPECT_EQ(best, Path::kAvx2);
  }
  EXPECT_EQ(SmallBatchGemm::Available(), best != Path::kPortable);
  EXPECT_EQ(SmallBatchGemm().path(), best);
}

TEST(SmallBatchGemmPaths, Avx512TakesUpTo64RowsAndAvx2UpTo32) {
  EXPECT_EQ(SmallBatchGemm::MaxRows(Path::kAvx512), 64u);
  EXPECT_EQ(SmallBatchGemm::MaxRows(Path::kPortable), 64u);
  EXPECT_EQ(SmallBatchGemm::MaxRows(Path::kAvx2), 32u);
  EXPECT_EQ(SmallBatchGemm::kMaxRows, 64u);
}

TEST(SmallBatchGemmSuits, OnlyFewRowsAndLargeLayers) {
  const bool have = SmallBatchGemm::Available();
  EXPECT_EQ(SmallBatchGemm::Suits(16, 3072, 3072), have);
  const size_t most = SmallBatchGemm::MaxRows(SmallBatchGemm::BestPath());
  EXPECT_EQ(SmallBatchGemm::Suits(most, 256, 256), have);
  EXPECT_FALSE(SmallBatchGemm::Suits(0, 3072, 3072));
  EXPECT_FALSE(SmallBatchGemm::Suits(most + 1, 3072, 3072));
  EXPECT_FALSE(SmallBatchGemm::Suits(SmallBatchGemm::kMaxRows + 1, 3072, 3072));
  EXPECT_FALSE(SmallBatchGemm::Suits(16, 10, 3072));   // an output layer
  EXPECT_FALSE(SmallBatchGemm::Suits(16, 255, 256));   // fewer than 65536 weights
}

}  // namespace
}  // namespace loco

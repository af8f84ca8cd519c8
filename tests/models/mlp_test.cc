#include "models/mlp.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tests/common/random_batch.h"
#include "models/small_batch_gemm.h"

namespace loco {
namespace {

// Independent double-precision forward pass of the same MLP: mean softmax
// cross-entropy, plus the argmax prediction per sample.
double ReferenceLoss(const std::vector<size_t>& sizes, const std::vector<double>& p,
                     const std::vector<double>& x, const std::vector<uint8_t>& y,
                     std::vector<size_t>* predictions = nullptr) {
  const size_t n = y.size();
  double total = 0;
  for (size_t s = 0; s < n; ++s) {
    std::vector<double> a(x.begin() + s * sizes[0], x.begin() + (s + 1) * sizes[0]);
    size_t off = 0;
    for (size_t k = 0; k + 1 < sizes.size(); ++k) {
      const size_t in = sizes[k], out = sizes[k + 1];
      std::vector<double> z(out);
      for (size_t o = 0; o < out; ++o) {
        double acc = p[off + out * in + o];  // bias follows the weights
        for (size_t i = 0; i < in; ++i) acc += p[off + o * in + i] * a[i];
        z[o] = (k + 2 < sizes.size()) ? std::max(acc, 0.0) : acc;
      }
      off += out * in + out;
      a = z;
    }
    const double mx = *std::max_element(a.begin(), a.end());
    double sum = 0;
    for (double v : a) sum += std::exp(v - mx);
    total += std::log(sum) - (a[y[s]] - mx);
    if (predictions) {
      predictions->push_back(static_cast<size_t>(std::max_element(a.begin(), a.end()) - a.begin()));
    }
  }
  return total / static_cast<double>(n);
}

using Batch = RandomBatchData;

TEST(MlpTest, FlatLayoutNamesAndOffsets) {
  auto m = Mlp::Create({5, 4, 3});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const auto& t = m->tensors();
  ASSERT_EQ(t.size(), 4u);
  // w0: 4x5 at 0, b0: 4 at 20, w1: 3x4 at 24, b1: 3 at 36; 39 in total.
  EXPECT_EQ(t[0].name, "w0");
  EXPECT_EQ(t[0].offset, 0u);
  EXPECT_EQ(t[0].size, 20u);
  EXPECT_EQ(t[0].rows, 4u);
  EXPECT_EQ(t[0].cols, 5u);
  EXPECT_EQ(t[1].name, "b0");
  EXPECT_EQ(t[1].offset, 20u);
  EXPECT_EQ(t[1].size, 4u);
  EXPECT_EQ(t[2].name, "w1");
  EXPECT_EQ(t[2].offset, 24u);
  EXPECT_EQ(t[2].size, 12u);
  EXPECT_EQ(t[3].name, "b1");
  EXPECT_EQ(t[3].offset, 36u);
  EXPECT_EQ(t[3].size, 3u);
  EXPECT_EQ(m->num_parameters(), 39u);

  auto big = Mlp::Create({784, 1024, 1024, 10});
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->num_parameters(), 784u * 1024 + 1024 + 1024u * 1024 + 1024 + 1024u * 10 + 10);
}

TEST(MlpTest, RejectsBadShapesAndInputs) {
  EXPECT_FALSE(Mlp::Create({5}).ok());
  EXPECT_FALSE(Mlp::Create({5, 0, 3}).ok());
  auto m = Mlp::Create({5, 4, 3});
  ASSERT_TRUE(m.ok());
  std::vector<float> p = m->InitialParameters(1), g;
  Batch b = RandomBatch(2, 5, 3, 7);
  b.labels[1] = 3;  // not a class
  EXPECT_EQ(m->LossAndGradient(p, b.images, b.labels, &g).status().code(), StatusCode::kInvalidArgument);
  b.labels[1] = 0;
  b.images.pop_back();
  EXPECT_EQ(m->LossAndGradient(p, b.images, b.labels, &g).status().code(), StatusCode::kInvalidArgument);
}

TEST(MlpTest, InitIsDeterministicAndFollowsPytorchBounds) {
  auto m = Mlp::Create({784, 256, 10});
  ASSERT_TRUE(m.ok());
  const std::vector<float> a = m->InitialParameters(42), b = m->InitialParameters(42),
                           c = m->InitialParameters(43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (const TensorInfo& t : m->tensors()) {
    const size_t fan_in = t.name[0] == 'w' ? t.cols : (t.name == "b0" ? 784 : 256);
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    double sum = 0, sq = 0;
    for (size_t i = 0; i < t.size; ++i) {
      const double v = a[t.offset + i];
      ASSERT_LE(std::abs(v), bound) << t.name;
      sum += v;
      sq += v * v;
    }
    if (t.size >= 10000) {
      // U(-b, b): mean 0, variance b^2/3.
      const double mean = sum / static_cast<double>(t.size);
      const double var = sq / static_cast<double>(t.size) - mean * mean;
      EXPECT_NEAR(mean, 0.0, 0.02 * bound) << t.name;
      EXPECT_NEAR(var, bound * bound / 3.0, 0.03 * bound * bound / 3.0) << t.name;
    }
  }
}

TEST(MlpTest, GradientMatchesCentralFiniteDifferencesInDouble) {
  const std::vector<size_t> sizes{5, 4, 3};
  auto m = Mlp::Create(sizes);
  ASSERT_TRUE(m.ok());
  for (uint64_t point = 0; point < 4; ++point) {
    std::vector<float> p = m->InitialParameters(100 + point);
    // Move away from the init so biases and weights are all exercised.
    std::mt19937_64 rng(point);
    std::normal_distribution<float> g(0.0f, 0.3f);
    for (float& v : p) v += g(rng);
    const Batch b = RandomBatch(6, 5, 3, 200 + point);
    std::vector<float> grads;
    auto loss = m->LossAndGradient(p, b.images, b.labels, &grads);
    ASSERT_TRUE(loss.ok()) << loss.status().ToString();
    ASSERT_EQ(grads.size(), p.size());

    std::vector<double> pd(p.begin(), p.end()), xd(b.images.begin(), b.images.end());
    EXPECT_NEAR(*loss, ReferenceLoss(sizes, pd, xd, b.labels), 1e-5);
    const double h = 1e-6;
    for (size_t i = 0; i < p.size(); ++i) {
      std::vector<double> plus = pd, minus = pd;
      plus[i] += h;
      minus[i] -= h;
      const double ref =
          (ReferenceLoss(sizes, plus, xd, b.labels) - ReferenceLoss(sizes, minus, xd, b.labels)) / (2 * h);
      // fp32 arithmetic in the model: relative 1e-3 with an absolute floor 1e-5.
      EXPECT_NEAR(grads[i], ref, 1e-5 + 1e-3 * std::abs(ref)) << "point " << point << " param " << i;
    }
  }
}

// Computes the gradient at `p` on `b` into *grads (a reused vector, first
// filled with NaN) with a listener, and checks that every reported suffix
// already held the values of `plain` (the gradient computed without a
// listener) when it was reported. Returns the reports, in order.
std::vector<size_t> ExpectFinalWhenReported(Mlp& m, const std::vector<float>& p, const Batch& b,
                                            const std::vector<float>& plain,
                                            std::vector<float>* grads) {
  grads->assign(p.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<size_t> reported;
  std::vector<std::vector<float>> suffix_at_report;
  const auto loss = m.LossAndGradient(p, b.images, b.labels, grads, [&](size_t from) {
    reported.push_back(from);
    suffix_at_report.emplace_back(grads->begin() + static_cast<ptrdiff_t>(from), grads->end());
  });
  EXPECT_TRUE(loss.ok()) << loss.status().ToString();
  for (size_t r = 0; r < reported.size(); ++r) {
    SCOPED_TRACE(reported[r]);
    EXPECT_EQ(std::memcmp(suffix_at_report[r].data(), plain.data() + reported[r],
                          suffix_at_report[r].size() * sizeof(float)),
              0);
  }
  return reported;
}

// The backward pass reports the gradient final from the last layer's weights
// down to the first's: every reported suffix already holds its final values
// at the moment it is reported, and the gradient equals one computed without
// a report, bit for bit. The vector is a reused one, filled with NaN: the
// model writes every element without clearing it first (a bias gradient not
// zeroed before it is summed would show here).
TEST(MlpTest, ReportsFinalSuffixesLastLayerFirst) {
  auto m = Mlp::Create({7, 9, 5, 3});
  ASSERT_TRUE(m.ok());
  const std::vector<float> p = m->InitialParameters(9);
  const Batch b = RandomBatch(4, 7, 3, 10);
  std::vector<float> plain;
  ASSERT_TRUE(m->LossAndGradient(p, b.images, b.labels, &plain).ok());

  std::vector<float> grads;
  const std::vector<size_t> reported = ExpectFinalWhenReported(*m, p, b, plain, &grads);
  const auto& t = m->tensors();  // w0 b0 w1 b1 w2 b2
  EXPECT_EQ(reported, (std::vector<size_t>{t[4].offset, t[2].offset, t[0].offset}));
  EXPECT_EQ(reported.back(), 0u);
  EXPECT_EQ(std::memcmp(grads.data(), plain.data(), plain.size() * sizeof(float)), 0);
}

// A large layer's weight gradient is reported in panels of rows, from the
// last row up (at least 2^17 elements each, at most 8 per layer: the
// contract in models/mlp.h), so that a worker can push the end of a layer
// while the rest computes; each reported suffix is final when reported, the
// whole equals the gradient computed without a listener bit for bit, and
// parameters in every panel match central finite differences in double.
TEST(MlpTest, ReportsALargeLayerInPanelsOfRowsFromTheLastUp) {
  const std::vector<size_t> sizes{300, 1024, 700, 10};
  auto m = Mlp::Create(sizes);
  ASSERT_TRUE(m.ok());
  const std::vector<float> p = m->InitialParameters(3);
  const Batch b = RandomBatch(4, 300, 10, 4);
  std::vector<float> plain;
  ASSERT_TRUE(m->LossAndGradient(p, b.images, b.labels, &plain).ok());

  std::vector<size_t> expected;
  const auto& t = m->tensors();  // w0 b0 w1 b1 w2 b2
  for (size_t k = sizes.size() - 1; k-- > 0;) {
    const size_t in = sizes[k], out = sizes[k + 1];
    const size_t panels = std::clamp<size_t>(in * out / (size_t{1} << 17), 1, 8);
    const size_t rows = (out + panels - 1) / panels;
    for (size_t end = out; end > 0;) {
      const size_t begin = end > rows ? end - rows : 0;
      expected.push_back(t[2 * k].offset + begin * in);
      end = begin;
    }
  }
  ASSERT_EQ(expected.size(), 1u + 5u + 2u);  // 7000, 716800 and 307200 weights

  std::vector<float> grads;
  const std::vector<size_t> reported = ExpectFinalWhenReported(*m, p, b, plain, &grads);
  EXPECT_EQ(reported, expected);
  EXPECT_EQ(std::memcmp(grads.data(), plain.data(), plain.size() * sizeof(float)), 0);
  // The first, middle and last element of every panel (a panel written at
  // the wrong rows would show as another weight's gradient).
  std::vector<double> pd(p.begin(), p.end()), xd(b.images.begin(), b.images.end());
  std::vector<size_t> probes;
  for (size_t r = 0; r < expected.size(); ++r) {
    const size_t end = r == 0 ? t[5].offset : std::max(expected[r - 1], expected[r]);
    const size_t from = expected[r];
    if (end <= from || end > p.size()) continue;
    probes.insert(probes.end(), {from, from + (end - from) / 2, end - 1});
  }
  ASSERT_GE(probes.size(), 12u);
  const double h = 1e-6;
  for (size_t i : probes) {
    std::vector<double> plus = pd, minus = pd;
    plus[i] += h;
    minus[i] -= h;
    const double ref = (ReferenceLoss(sizes, plus, xd, b.labels) -
                        ReferenceLoss(sizes, minus, xd, b.labels)) / (2 * h);
    EXPECT_NEAR(grads[i], ref, 1e-6 + 2e-3 * std::abs(ref)) << "param " << i;
  }
}

// Computes the gradient at a copy of `p` with a listener that, told that
// the gradient from a layer k >= 1's weight offset on is final, overwrites
// that layer's weights W_k with NaN: a layer's input gradient δ·W_k computed
// after the call would read them and carry NaN into every earlier layer's
// gradient. Returns the gradient.
std::vector<float> GradientWithWeightsSpoiledWhenReported(Mlp& m, const std::vector<float>& p,
                                                          const Batch& b) {
  std::vector<float> params = p, grads;
  const auto& t = m.tensors();
  const auto loss = m.LossAndGradient(params, b.images, b.labels, &grads, [&](size_t from) {
    for (size_t k = 1; 2 * k < t.size(); ++k) {
      const TensorInfo& w = t[2 * k];
      if (from == w.offset) {
        std::fill_n(params.begin() + static_cast<ptrdiff_t>(w.offset), w.size,
                    std::numeric_limits<float>::quiet_NaN());
      }
    }
  });
  EXPECT_TRUE(loss.ok()) << loss.status().ToString();
  return grads;
}

// ReadyGranularity::kTensor, on the layers the panel test splits into 5 and
// 2 panels: one report per layer, last layer first, each at the layer's
// weight offset and with everything from there on final; the gradient is
// the panel one, bit for bit. And each report comes after the layer's input
// gradient δ·W: weights spoiled at the report leave the gradient as it was,
// where at panel granularity (reported before δ·W) they spoil it.
TEST(MlpTest, TensorGranularityReportsEachLayerOnceAfterItsInputGradient) {
  const std::vector<size_t> sizes{300, 1024, 700, 10};
  auto m = Mlp::Create(sizes);
  ASSERT_TRUE(m.ok());
  const std::vector<float> p = m->InitialParameters(5);
  const Batch b = RandomBatch(4, 300, 10, 6);
  std::vector<float> panel;
  ASSERT_TRUE(m->LossAndGradient(p, b.images, b.labels, &panel).ok());
  const std::vector<float> spoiled_panel = GradientWithWeightsSpoiledWhenReported(*m, p, b);
  EXPECT_NE(std::memcmp(spoiled_panel.data(), panel.data(), panel.size() * sizeof(float)), 0)
      << "the probe must see a report made before δ·W";

  m->set_ready_granularity(ReadyGranularity::kTensor);
  std::vector<float> grads;
  const std::vector<size_t> reported = ExpectFinalWhenReported(*m, p, b, panel, &grads);
  const auto& t = m->tensors();  // w0 b0 w1 b1 w2 b2
  EXPECT_EQ(reported, (std::vector<size_t>{t[4].offset, t[2].offset, t[0].offset}));
  EXPECT_EQ(std::memcmp(grads.data(), panel.data(), panel.size() * sizeof(float)), 0);
  std::vector<float> unlistened;
  ASSERT_TRUE(m->LossAndGradient(p, b.images, b.labels, &unlistened).ok());
  EXPECT_EQ(std::memcmp(unlistened.data(), panel.data(), panel.size() * sizeof(float)), 0);
  const std::vector<float> spoiled = GradientWithWeightsSpoiledWhenReported(*m, p, b);
  EXPECT_EQ(std::memcmp(spoiled.data(), panel.data(), panel.size() * sizeof(float)), 0);
}

// Sets OpenBLAS's thread count for a scope (Mlp picks its products by it).
class ScopedBlasThreads {
 public:
  explicit ScopedBlasThreads(int threads) : previous_(openblas_get_num_threads()) {
    openblas_set_num_threads(threads);
  }
  ~ScopedBlasThreads() { openblas_set_num_threads(previous_); }
  ScopedBlasThreads(const ScopedBlasThreads&) = delete;
  ScopedBlasThreads& operator=(const ScopedBlasThreads&) = delete;

 private:
  int previous_;
};

// A batch of 8 through the two large layers, on one BLAS thread: with
// small-batch products allowed (the default) they run on
// SmallBatchGemm, with them refused on OpenBLAS (the output layer,
// 7000 weights, on OpenBLAS both times). The two gradients agree to float
// rounding and are not the same bits (so both paths ran); the small-batch
// one is final when reported and the same with or without a listener.
TEST(MlpTest, SmallBatchGemmAgreeWithOpenBlas) {
  const std::vector<size_t> sizes{300, 1024, 700, 10};
  if (!SmallBatchGemm::Suits(8, 1024, 300)) GTEST_SKIP() << "no small-batch products here";
  auto m = Mlp::Create(sizes);
  ASSERT_TRUE(m.ok());
  const std::vector<float> p = m->InitialParameters(21);
  const Batch b = RandomBatch(8, 300, 10, 22);
  ScopedBlasThreads one(1);
  std::vector<float> small, blas, listened;
  auto small_loss = m->LossAndGradient(p, b.images, b.labels, &small);
  ASSERT_TRUE(small_loss.ok());
  ExpectFinalWhenReported(*m, p, b, small, &listened);
  EXPECT_EQ(std::memcmp(listened.data(), small.data(), small.size() * sizeof(float)), 0);
  m->set_small_batch_gemm(false);
  auto blas_loss = m->LossAndGradient(p, b.images, b.labels, &blas);
  ASSERT_TRUE(blas_loss.ok());
  EXPECT_NEAR(*small_loss, *blas_loss, 1e-5 * std::abs(*blas_loss));
  ASSERT_EQ(small.size(), blas.size());
  for (const TensorInfo& t : m->tensors()) {
    SCOPED_TRACE(t.name);
    float scale = 0;
    for (size_t k = 0; k < t.size; ++k) scale = std::max(scale, std::abs(blas[t.offset + k]));
    for (size_t k = 0; k < t.size; ++k) {
      const float want = blas[t.offset + k];
      ASSERT_NEAR(small[t.offset + k], want, 1e-5f * scale + 1e-4f * std::abs(want)) << k;
    }
  }
  EXPECT_NE(std::memcmp(small.data(), blas.data(), small.size() * sizeof(float)), 0);
}

TEST(MlpTest, LossDecreasesUnderPlainAdamOnAFixedBatch) {
  auto m = Mlp::Create({8, 16, 4});
  ASSERT_TRUE(m.ok());
  std::vector<float> p = m->InitialParameters(5), grads;
  const Batch b = RandomBatch(16, 8, 4, 9);
  std::vector<double> mom(p.size(), 0), vel(p.size(), 0);
  auto first = m->LossAndGradient(p, b.images, b.labels, &grads);
  ASSERT_TRUE(first.ok());
  double last = *first;
  for (int t = 1; t <= 30; ++t) {
    for (size_t i = 0; i < p.size(); ++i) {
      mom[i] = 0.9 * mom[i] + 0.1 * grads[i];
      vel[i] = 0.999 * vel[i] + 0.001 * grads[i] * grads[i];
      const double mh = mom[i] / (1 - std::pow(0.9, t)), vh = vel[i] / (1 - std::pow(0.999, t));
      p[i] -= static_cast<float>(1e-2 * mh / (std::sqrt(vh) + 1e-8));
    }
    auto l = m->LossAndGradient(p, b.images, b.labels, &grads);
    ASSERT_TRUE(l.ok());
    last = *l;
  }
  EXPECT_LT(last, 0.5 * *first);
}

TEST(MlpTest, EvaluateMatchesReferencePredictions) {
  const std::vector<size_t> sizes{6, 7, 5};
  auto m = Mlp::Create(sizes);
  ASSERT_TRUE(m.ok());
  const std::vector<float> p = m->InitialParameters(11);
  const Batch b = RandomBatch(53, 6, 5, 12);
  std::vector<size_t> pred;
  std::vector<double> pd(p.begin(), p.end()), xd(b.images.begin(), b.images.end());
  const double ref_loss = ReferenceLoss(sizes, pd, xd, b.labels, &pred);
  size_t correct = 0;
  for (size_t i = 0; i < pred.size(); ++i) correct += pred[i] == b.labels[i];
  auto e = m->Evaluate(p, b.images, b.labels, /*chunk=*/10);  // uneven chunks on purpose
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_DOUBLE_EQ(e->accuracy, static_cast<double>(correct) / 53.0);
  EXPECT_NEAR(e->loss, ref_loss, 1e-5);
}

}  // namespace
}  // namespace loco

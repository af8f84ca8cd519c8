// ShardStore's AdamW step fed piece by piece (the server never holds a step's
// whole mean gradient) against the one-call kernels over the whole vector,
// bit for bit on any number of threads, and against plain AdamW in double;
// the moments allocated by the first step, not before.
#include "server/shard_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "tests/server/reference.h"

namespace loco {
namespace {

// Several whole pieces and a last piece whose length is not a multiple of 8.
constexpr size_t kStoreLength = 2 * ShardStore::kApplyPiece + 1003;

// The norm ShardStore reports: eight lanes per piece, each piece's from
// zero, the pieces' lanes added in piece order (independent of the threads).
double PieceOrderNorm(const std::vector<float>& g) {
  double total[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t begin = 0; begin < g.size(); begin += ShardStore::kApplyPiece) {
    double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    cpu::AddSquaredNormLanes(g.data() + begin,
                             std::min(ShardStore::kApplyPiece, g.size() - begin), lanes);
    for (size_t k = 0; k < 8; ++k) total[k] += lanes[k];
  }
  return std::sqrt(cpu::CombineSquaredNormLanes(total));
}

TEST(ShardStoreTest, StepInPiecesOnAnyThreadsEqualsTheWholeVectorStepBitForBit) {
  for (size_t threads : {1, 2, 3, 8}) {
    for (float max_norm : {0.0f, 5.0f}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads, max norm " << max_norm);
      AdamWParams hyper;
      hyper.lr = 0.01f;
      hyper.weight_decay = 0.1f;
      hyper.max_grad_norm = max_norm;
      const std::vector<float> init = test::RandomVector(kStoreLength, 1);
      ShardStore store;
      ASSERT_TRUE(store.Initialize(ShardRange{0, kStoreLength}, init).ok());
      // The expectation: the whole-vector kernels, one call each, as the
      // server ran them before it fed AdamW in pieces.
      std::vector<float> p = init, m(kStoreLength, 0.0f), v(kStoreLength, 0.0f);
      test::ReferenceAdamW plain(init, hyper);
      for (int t = 1; t <= 3; ++t) {
        const std::vector<float> g = test::RandomVector(kStoreLength, 10 + t, 0.05f * t);
        const double norm = PieceOrderNorm(g);
        EXPECT_NEAR(norm, std::sqrt(cpu::SquaredNorm(g.data(), kStoreLength)), 1e-12 * norm);
        const float scale = ClipScale(norm, max_norm);
        ASSERT_TRUE(
            cpu::AdamW(p.data(), m.data(), v.data(), g.data(), kStoreLength, t, hyper, scale).ok());
        plain.Step(std::vector<double>(g.begin(), g.end()));

        std::mutex mu;
        std::vector<size_t> asked;
        auto pieces = [&](size_t begin, size_t count, float* scratch) {
          {
            std::lock_guard<std::mutex> lock(mu);
            asked.push_back(begin);
          }
          EXPECT_LE(count, ShardStore::kApplyPiece);
          EXPECT_EQ(count, std::min(ShardStore::kApplyPiece, kStoreLength - begin));
          std::memcpy(scratch, g.data() + begin, count * sizeof(float));
          return static_cast<const float*>(scratch);
        };
        ApplyStats stats;
        ASSERT_TRUE(store.Apply(pieces, hyper, &stats, threads).ok());
        const size_t n_pieces =
            (kStoreLength + ShardStore::kApplyPiece - 1) / ShardStore::kApplyPiece;
        EXPECT_EQ(stats.threads, std::min(threads, n_pieces));
        // Every piece once, and once more first when clipping needs the
        // norm; in order on one thread.
        ASSERT_EQ(asked.size(), max_norm > 0 ? 2 * n_pieces : n_pieces);
        if (threads > 1) std::sort(asked.begin(), asked.end());
        for (size_t k = 0; k < asked.size(); ++k) {
          const size_t piece = threads > 1 ? k / (asked.size() / n_pieces) : k % n_pieces;
          EXPECT_EQ(asked[k], piece * ShardStore::kApplyPiece);
        }
        EXPECT_EQ(store.version(), static_cast<uint64_t>(t));
        EXPECT_EQ(stats.grad_norm, norm);
        EXPECT_EQ(stats.grad_scale, scale);
        if (max_norm > 0) {
          EXPECT_LT(scale, 1.0f);  // the clipping case really clips
        }
        ASSERT_EQ(0, std::memcmp(store.params().data(), p.data(), kStoreLength * sizeof(float)));
        ASSERT_EQ(0, std::memcmp(store.m().data(), m.data(), kStoreLength * sizeof(float)));
        ASSERT_EQ(0, std::memcmp(store.v().data(), v.data(), kStoreLength * sizeof(float)));
        EXPECT_TRUE(test::AllNear(store.params(), plain.params(), 1e-5));
      }
    }
  }
}

TEST(ShardStoreTest, MomentsAreHeldFromTheFirstStepAndARestoreWithoutThemStartsAtZero) {
  constexpr size_t kN = 1000;
  const std::vector<float> init = test::RandomVector(kN, 3);
  const std::vector<float> g = test::RandomVector(kN, 4, 0.1f);
  AdamWParams hyper;
  hyper.lr = 0.01f;
  ShardStore fresh;
  ASSERT_TRUE(fresh.Initialize(ShardRange{0, kN}, init).ok());
  EXPECT_TRUE(fresh.m().empty());
  EXPECT_TRUE(fresh.v().empty());
  ASSERT_TRUE(fresh.Apply(g, hyper, nullptr).ok());
  ASSERT_EQ(fresh.m().size(), kN);
  ASSERT_EQ(fresh.v().size(), kN);
  // The expectation: the kernel from explicit zero moments.
  std::vector<float> p = init, m(kN, 0.0f), v(kN, 0.0f);
  ASSERT_TRUE(cpu::AdamW(p.data(), m.data(), v.data(), g.data(), kN, 1, hyper, 1.0f).ok());
  EXPECT_EQ(fresh.params(), p);
  EXPECT_EQ(fresh.m(), m);
  EXPECT_EQ(fresh.v(), v);

  // Allocated ahead of the step: zeros, and the step is the same.
  ShardStore early;
  EXPECT_EQ(early.AllocateMoments().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(early.Initialize(ShardRange{0, kN}, init).ok());
  ASSERT_TRUE(early.AllocateMoments().ok());
  EXPECT_EQ(early.m(), std::vector<float>(kN, 0.0f));
  EXPECT_EQ(early.v(), std::vector<float>(kN, 0.0f));
  ASSERT_TRUE(early.Apply(g, hyper, nullptr).ok());
  EXPECT_EQ(early.params(), p);
  EXPECT_EQ(early.v(), v);

  // A checkpoint taken before any step may carry no moments: zeros.
  ShardStore restored;
  ASSERT_TRUE(restored.Restore(ShardRange{0, kN}, 0, init, {}, {}).ok());
  ASSERT_TRUE(restored.Apply(g, hyper, nullptr).ok());
  EXPECT_EQ(restored.params(), p);
  EXPECT_EQ(restored.m(), m);
  // One moment without the other is a broken checkpoint.
  ShardStore half;
  const Status refused = half.Restore(ShardRange{0, kN}, 0, init, m, {});
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.ToString();
  EXPECT_FALSE(half.initialized());
}

TEST(ShardStoreTest, RefusedStepChangesNothing) {
  const std::vector<float> init = test::RandomVector(100, 2);
  ShardStore store;
  ASSERT_TRUE(store.Initialize(ShardRange{0, 100}, init).ok());
  AdamWParams bad;
  bad.lr = -1.0f;
  size_t calls = 0;
  auto pieces = [&](size_t, size_t, float* scratch) {
    ++calls;
    return static_cast<const float*>(scratch);
  };
  EXPECT_FALSE(store.Apply(pieces, bad, nullptr).ok());
  EXPECT_FALSE(store.Apply(std::vector<float>(99, 1.0f), AdamWParams{}, nullptr).ok());
  EXPECT_EQ(calls, 0u);
  EXPECT_EQ(store.version(), 0u);
  EXPECT_EQ(store.params(), init);
  ShardStore empty;
  EXPECT_FALSE(empty.Apply(pieces, AdamWParams{}, nullptr).ok());
}

// AdamW counts steps in int64: no version past 2^63 - 1 is taken, and no
// step follows that one. Refused before anything is touched, add_mean
// spans included (they need no step count, but must not wrap the version).
TEST(ShardStoreTest, NoVersionPastTheLastStepCountIsTakenOrSteppedFrom) {
  const std::vector<float> init = test::RandomVector(100, 3);
  const uint64_t past = ShardStore::kMaxVersion + 1;
  ShardStore refused;
  EXPECT_EQ(refused.Initialize(ShardRange{0, 100}, init, past).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.Restore(ShardRange{0, 100}, past, init, {}, {}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(refused.initialized());

  ShardStore store;
  ASSERT_TRUE(store.Initialize(ShardRange{0, 100}, init, ShardStore::kMaxVersion - 1).ok());
  EXPECT_EQ(store.FastForward(past).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.version(), ShardStore::kMaxVersion - 1);
  // The step from kMaxVersion - 1 is step kMaxVersion: taken.
  ASSERT_TRUE(store.Apply(std::vector<float>(100, 0.5f), AdamWParams{}, nullptr).ok());
  ASSERT_EQ(store.version(), ShardStore::kMaxVersion);
  const std::vector<float> last = store.params();
  HyperSpan span;
  span.begin = 0;
  span.end = 100;
  span.add_mean = true;
  const HyperGroups add_mean({span}, 0.0f);
  const auto pieces = [](size_t, size_t, float* scratch) {
    std::fill(scratch, scratch + 100, 0.5f);
    return static_cast<const float*>(scratch);
  };
  for (const Status& s : {store.Apply(std::vector<float>(100, 0.5f), AdamWParams{}, nullptr),
                          store.Apply(pieces, add_mean, nullptr)}) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  }
  EXPECT_EQ(store.version(), ShardStore::kMaxVersion);
  EXPECT_EQ(store.params(), last);
}

}  // namespace
}  // namespace loco

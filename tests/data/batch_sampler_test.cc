#include "data/batch_sampler.h"

#include <gtest/gtest.h>

#include <vector>

namespace loco {
namespace {

// One data epoch is the positions [e·N, (e+1)·N); every step's batch is split
// among W ranks. Across all steps and ranks, each sample must appear exactly
// once among the positions of the epoch.
TEST(BatchSamplerTest, EveryEpochCoversEverySampleOnceForAnyWorld) {
  const size_t n = 1000, batch = 64;  // 64 does not divide 1000: batches wrap
  for (uint32_t world = 1; world <= 5; ++world) {
    auto s = BatchSampler::Create(n, batch, 7);
    ASSERT_TRUE(s.ok());
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      std::vector<int> seen(n, 0);
      const uint64_t lo = epoch * n, hi = lo + n;
      for (uint64_t step = lo / batch; step * batch < hi; ++step) {
        size_t total = 0;
        for (uint32_t rank = 0; rank < world; ++rank) {
          const auto r = s->RankRange(step, world, rank);
          const auto idx = s->Indices(step, world, rank);
          ASSERT_EQ(idx.size(), r.count);
          total += r.count;
          // Shares differ by at most one sample.
          EXPECT_LE(r.count, batch / world + 1);
          EXPECT_GE(r.count, batch / world);
          for (size_t i = 0; i < idx.size(); ++i) {
            const uint64_t pos = r.first + i;
            ASSERT_LT(idx[i], n);
            if (pos >= lo && pos < hi) ++seen[idx[i]];
          }
        }
        EXPECT_EQ(total, batch);
      }
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(seen[i], 1) << "world " << world << " epoch " << epoch << " sample " << i;
      }
    }
  }
}

TEST(BatchSamplerTest, SameSeedSameOrderAndEpochsDiffer) {
  auto a = BatchSampler::Create(500, 50, 3);
  auto b = BatchSampler::Create(500, 50, 3);
  auto c = BatchSampler::Create(500, 50, 4);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<size_t> ea, eb, ec, next;
  for (uint64_t p = 0; p < 500; ++p) {
    ea.push_back(a->SampleAt(p));
    eb.push_back(b->SampleAt(p));
    ec.push_back(c->SampleAt(p));
    next.push_back(a->SampleAt(p + 500));
  }
  EXPECT_EQ(ea, eb);
  EXPECT_NE(ea, ec);
  EXPECT_NE(ea, next);
  EXPECT_EQ(a->steps_per_epoch(), 10u);
  EXPECT_FALSE(BatchSampler::Create(0, 10, 0).ok());
  EXPECT_FALSE(BatchSampler::Create(10, 0, 0).ok());
}

}  // namespace
}  // namespace loco

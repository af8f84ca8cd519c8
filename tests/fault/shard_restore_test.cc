// The pieces a restarted shard relies on: restoring the optimizer state,
// fast-forwarding its version, the return path's forced full sync after a
// restore, and the straggler slack of a step.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "server/return_path.h"
#include "server/shard_store.h"
#include "server/step_aggregator.h"

namespace loco {
namespace {

std::vector<float> RandomShard(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(ShardRestore, RestoredStoreContinuesLikeTheOriginal) {
  // Two stores: one runs 3 steps straight; the other is restored from the
  // first's state after step 1 and runs the last 2. They must agree exactly.
  const ShardRange range{0, 256};
  AdamWParams hyper;
  hyper.lr = 0.01f;
  ShardStore a;
  ASSERT_TRUE(a.Initialize(range, RandomShard(256, 1)).ok());
  ASSERT_TRUE(a.Apply(RandomShard(256, 10), hyper, nullptr).ok());
  ShardStore b;
  ASSERT_TRUE(b.Restore(range, a.version(), a.params(), a.m(), a.v()).ok());
  EXPECT_FALSE(b.Restore(range, 0, a.params(), a.m(), a.v()).ok());  // only once
  for (uint32_t seed : {11u, 12u}) {
    ASSERT_TRUE(a.Apply(RandomShard(256, seed), hyper, nullptr).ok());
    ASSERT_TRUE(b.Apply(RandomShard(256, seed), hyper, nullptr).ok());
  }
  EXPECT_EQ(a.version(), 3u);
  EXPECT_EQ(b.version(), 3u);
  EXPECT_EQ(a.params(), b.params());
  EXPECT_EQ(a.m(), b.m());
  EXPECT_EQ(a.v(), b.v());

  ShardStore wrong;
  EXPECT_FALSE(
      wrong.Restore(range, 0, RandomShard(255, 1), RandomShard(256, 2), RandomShard(256, 3)).ok());
}

TEST(ShardRestore, FastForwardMovesOnlyTheVersionAndNeverBack) {
  ShardStore s;
  EXPECT_FALSE(s.FastForward(3).ok());  // not initialised
  const auto init = RandomShard(64, 5);
  ASSERT_TRUE(s.Initialize(ShardRange{0, 64}, init, 4).ok());
  ASSERT_TRUE(s.FastForward(9).ok());
  EXPECT_EQ(s.version(), 9u);
  EXPECT_EQ(s.params(), init);
  EXPECT_FALSE(s.FastForward(8).ok());
  EXPECT_EQ(s.version(), 9u);
}

TEST(ShardRestore, ReturnPathAfterRestoreServesTheSavedReplicaThenAFullSync) {
  ReturnPathOptions o;
  o.codec = PullCodec::kDelta;
  o.full_sync_every = 0;
  const ShardRange range{0, 256};
  const auto master = RandomShard(256, 1), replica = RandomShard(256, 2);
  ReturnPath rp(o);
  rp.Restore(master, replica);
  EXPECT_EQ(rp.replica(), replica);  // what the workers held before the crash

  v1::PullRequest req;
  req.set_have_any(true);
  req.set_have_version(6);
  v1::PullResponse resp;
  ReturnPath::Attach(rp.Encode(req, master, 7, range, &resp), &resp);  // no delta: W in fp32
  EXPECT_FALSE(resp.is_delta());
  std::vector<float> got(256);
  std::memcpy(got.data(), resp.params().data().data(), 256 * 4);
  EXPECT_EQ(got, replica);

  // The first step after a restore is a full sync (workers may hold copies
  // from before the crash): W := P and no delta is offered.
  auto next = master;
  for (auto& x : next) x += 0.25f;
  ASSERT_TRUE(rp.OnApplied(next, 8).ok());
  EXPECT_EQ(rp.replica(), next);
  EXPECT_EQ(rp.delta_version(), 0u);
  // The step after that is a delta again.
  auto later = next;
  for (auto& x : later) x -= 0.125f;
  ASSERT_TRUE(rp.OnApplied(later, 9).ok());
  EXPECT_EQ(rp.delta_version(), 9u);
}

OwnedPayload Fp32(const std::vector<float>& v) {
  v1::Payload p;
  p.set_codec(v1::CODEC_FP32);
  p.set_offset(0);
  p.set_length(v.size());
  p.set_data(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  return OwnedPayload::FromProto(p, ShardRange{0, v.size()}).value();
}

TEST(StragglerSlack, StepCompletesOnceAllButKLiveParticipantsPushed) {
  StepAggregator step;
  step.Open(3);
  const std::vector<uint64_t> live = {1, 2, 3, 4};
  EXPECT_FALSE(step.CompleteFor(live, 1));  // nobody pushed
  const auto g1 = RandomShard(32, 1), g2 = RandomShard(32, 2), g3 = RandomShard(32, 3);
  ASSERT_TRUE(step.Add(1, Fp32(g1)));
  ASSERT_TRUE(step.Add(2, Fp32(g2)));
  EXPECT_FALSE(step.CompleteFor(live, 0));
  EXPECT_FALSE(step.CompleteFor(live, 1));
  EXPECT_TRUE(step.CompleteFor(live, 2));
  ASSERT_TRUE(step.Add(3, Fp32(g3)));
  EXPECT_FALSE(step.CompleteFor(live, 0));
  EXPECT_TRUE(step.CompleteFor(live, 1));
  // The mean is over the payloads received, not over the participants.
  std::vector<float> mean;
  ASSERT_TRUE(step.Mean(32, &mean).ok());
  for (size_t i = 0; i < 32; ++i) {
    const double expect = (double(g1[i]) + g2[i] + g3[i]) / 3.0;
    EXPECT_NEAR(mean[i], expect, 1e-6);
  }
}

}  // namespace
}  // namespace loco

// Elastic membership: a participant that leaves or stops heartbeating stops
// being waited for, and the step completes with the others' mean.
#include <gtest/gtest.h>

#include "tests/cluster/test_cluster.h"
#include "tests/server/reference.h"

namespace loco::test {
namespace {

constexpr uint64_t kTotal = 384;

struct JoinedWorkers {
  std::vector<uint64_t> workers;
  std::vector<float> init;
};

::testing::AssertionResult JoinAndInit(TestCluster& c, int n, JoinedWorkers* out) {
  for (int i = 0; i < n; ++i) {
    v1::JoinResponse join;
    auto s = c.Join(kTotal, &join);
    if (!s.ok()) return ::testing::AssertionFailure() << s.error_message();
    out->workers.push_back(join.worker_id());
  }
  out->init = RandomVector(kTotal, 77);
  auto s = c.InitShard(0, out->workers[0], Fp32Payload(out->init, 0));
  if (!s.ok()) return ::testing::AssertionFailure() << s.error_message();
  return ::testing::AssertionSuccess();
}

std::vector<double> MeanOf(const std::vector<std::vector<float>>& gs) {
  std::vector<double> mean(gs[0].size(), 0.0);
  for (const auto& g : gs) {
    for (size_t i = 0; i < g.size(); ++i) mean[i] += double(g[i]) / gs.size();
  }
  return mean;
}

TEST(Elastic, ParticipantThatLeavesIsNoLongerAwaited) {
  ClusterOptions o;
  o.shard.return_path.codec = PullCodec::kFp32;
  TestCluster c(o);
  ASSERT_TRUE(c.Start());
  JoinedWorkers s;
  ASSERT_TRUE(JoinAndInit(c, 3, &s));
  const auto g0 = RandomVector(kTotal, 1), g1 = RandomVector(kTotal, 2);
  ASSERT_TRUE(c.Push(0, s.workers[0], 0, Fp32Payload(g0, 0)).ok());
  ASSERT_TRUE(c.Push(0, s.workers[1], 0, Fp32Payload(g1, 0)).ok());
  v1::ShardStatusResponse st;
  ASSERT_TRUE(c.ShardStatus(0, &st).ok());
  EXPECT_EQ(st.version(), 0u);  // still waiting for the third participant
  EXPECT_EQ(st.pending_pushes(), 2u);

  ASSERT_TRUE(c.Leave(s.workers[2]).ok());
  v1::PullResponse resp;
  auto pulled = c.PullFull(0, 1, 5000, &resp);  // bounded: at most 5 s
  ASSERT_TRUE(pulled.ok()) << pulled.error_message();
  ReferenceAdamW ref(s.init, o.shard.hyper);
  ref.Step(MeanOf({g0, g1}));
  EXPECT_TRUE(AllNear(FloatsOf(resp.params().data()), ref.params(), 1e-5));
}

TEST(Elastic, ParticipantThatStopsHeartbeatingExpiresAndIsNoLongerAwaited) {
  ClusterOptions o;
  o.heartbeat_timeout = std::chrono::milliseconds(500);
  o.heartbeat_interval = std::chrono::milliseconds(50);
  o.shard.return_path.codec = PullCodec::kFp32;
  TestCluster c(o);
  ASSERT_TRUE(c.Start());
  JoinedWorkers s;
  ASSERT_TRUE(JoinAndInit(c, 3, &s));
  const auto g0 = RandomVector(kTotal, 3), g1 = RandomVector(kTotal, 4);
  ASSERT_TRUE(c.Push(0, s.workers[0], 0, Fp32Payload(g0, 0)).ok());
  ASSERT_TRUE(c.Push(0, s.workers[1], 0, Fp32Payload(g1, 0)).ok());

  // Workers 0 and 1 keep heartbeating; worker 2 is silent. Bounded: at most
  // 100 rounds of a 50 ms pull.
  bool done = false;
  v1::PullResponse resp;
  for (int round = 0; round < 100 && !done; ++round) {
    ASSERT_TRUE(c.Heartbeat(s.workers[0]).ok());
    ASSERT_TRUE(c.Heartbeat(s.workers[1]).ok());
    auto pulled = c.PullFull(0, 1, 50, &resp);
    if (pulled.ok()) {
      done = true;
    } else {
      ASSERT_EQ(pulled.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << pulled.error_message();
    }
  }
  ASSERT_TRUE(done) << "the step never completed without the silent worker";
  EXPECT_EQ(c.Heartbeat(s.workers[2]).error_code(), grpc::StatusCode::NOT_FOUND);
  ReferenceAdamW ref(s.init, o.shard.hyper);
  ref.Step(MeanOf({g0, g1}));
  EXPECT_TRUE(AllNear(FloatsOf(resp.params().data()), ref.params(), 1e-5));
}

}  // namespace
}  // namespace loco::test

// End-to-end step arithmetic through real gRPC: the server's parameters must
// equal AdamW computed independently in double precision.
#include <gtest/gtest.h>

#include "tests/cluster/test_cluster.h"
#include "tests/server/reference.h"

namespace loco::test {
namespace {

// fp32 master and fp32 reference differ by rounding only: a few ulp per step.
constexpr double kRelTolerance = 1e-5;

std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<float> PulledParams(TestCluster& c, uint32_t shard, uint64_t min_version) {
  v1::PullResponse resp;
  auto s = c.PullFull(shard, min_version, 5000, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.version(), min_version);
  EXPECT_EQ(resp.params().codec(), v1::CODEC_FP32);
  return FloatsOf(resp.params().data());
}

// A worker's pull of the version after `have` (holding `have`), waiting up to 5 s.
v1::PullRequest NextVersionPull(uint64_t worker, uint64_t have) {
  v1::PullRequest req;
  req.set_worker_id(worker);
  req.set_min_version(have + 1);
  req.set_wait_ms(5000);
  req.set_have_version(have);
  req.set_have_any(true);
  return req;
}

TEST(Training, OneWorkerFp32TwentyStepsMatchReferenceAdamW) {
  ClusterOptions o;
  o.shard.hyper.lr = 1e-2f;
  o.shard.hyper.weight_decay = 0.01f;
  o.shard.return_path.codec = PullCodec::kFp32;
  TestCluster c(o);
  ASSERT_TRUE(c.Start());
  v1::JoinResponse join;
  ASSERT_TRUE(c.Join(1000, &join).ok());
  const uint64_t me = join.worker_id();
  const auto init = RandomVector(1000, 1);
  ASSERT_TRUE(c.InitShard(0, me, Fp32Payload(init, 0)).ok());
  ReferenceAdamW ref(init, o.shard.hyper);
  for (uint64_t t = 0; t < 20; ++t) {
    const auto g = RandomVector(1000, 100 + t);
    v1::PushResponse pushed;
    ASSERT_TRUE(c.Push(0, me, t, Fp32Payload(g, 0), &pushed).ok());
    EXPECT_EQ(pushed.version(), t + 1);  // the only participant: the step completed
    EXPECT_FALSE(pushed.duplicate());
    ref.Step(ToDouble(g));
    v1::PullResponse resp;
    ASSERT_TRUE(c.Pull(NextVersionPull(me, t), &resp).ok());
    EXPECT_EQ(resp.version(), t + 1);
    EXPECT_FALSE(resp.is_delta());
    ASSERT_EQ(resp.params().codec(), v1::CODEC_FP32);
    ASSERT_TRUE(AllNear(FloatsOf(resp.params().data()), ref.params(), kRelTolerance))
        << "after step " << t;
  }
}

TEST(Training, FourWorkersFourBitPayloadsAverageOverTwoShards) {
  ClusterOptions o;
  o.num_shards = 2;
  o.shard.hyper.lr = 1e-2f;
  o.shard.hyper.weight_decay = 0.1f;
  o.shard.hyper.eps = 1e-3f;          // large enough that clipping changes the update
  o.shard.hyper.max_grad_norm = 0.05f;
  o.shard.return_path.codec = PullCodec::kFp32;
  TestCluster c(o);
  ASSERT_TRUE(c.Start());
  std::vector<uint64_t> workers;
  for (int w = 0; w < 4; ++w) {
    v1::JoinResponse join;
    ASSERT_TRUE(c.Join(1000, &join).ok());
    workers.push_back(join.worker_id());
  }
  const auto init = RandomVector(1000, 7);
  std::vector<ReferenceAdamW> refs;
  for (uint32_t k = 0; k < 2; ++k) {
    const ShardRange r = c.Range(k);
    ASSERT_GT(r.length, 0u);
    std::vector<float> part(init.begin() + r.offset, init.begin() + r.offset + r.length);
    ASSERT_TRUE(c.InitShard(k, workers[0], Fp32Payload(part, r.offset)).ok());
    refs.emplace_back(part, o.shard.hyper);
  }
  for (uint64_t step = 0; step < 3; ++step) {
    for (uint32_t k = 0; k < 2; ++k) {
      const ShardRange r = c.Range(k);
      std::vector<double> mean(r.length, 0.0);
      for (size_t w = 0; w < workers.size(); ++w) {
        const auto g = RandomVector(r.length, 1000 * step + 10 * k + w);
        const auto payload = QuantPayload(g, r.offset, 4, 128);
        const auto decoded = DecodeReference(payload);
        for (size_t i = 0; i < mean.size(); ++i) mean[i] += decoded[i] / workers.size();
        ASSERT_TRUE(c.Push(k, workers[w], step, payload).ok());
      }
      refs[k].Step(mean);
      ASSERT_TRUE(AllNear(PulledParams(c, k, step + 1), refs[k].params(), kRelTolerance))
          << "shard " << k << " step " << step;
    }
  }
}

// What a cluster of one shard returns over three clipped steps of two
// workers' 4-bit pushes: each step's delta (codes and scales) and the full
// fp32 copy a worker then pulls (the replica W: the master up to the last
// delta's rounding). The shard spans several apply pieces and delta chunks.
struct AppliedRun {
  std::vector<std::string> deltas;
  std::vector<float> final_params;
};

AppliedRun RunThreeSteps(uint32_t apply_threads, ReferenceAdamW* ref) {
  constexpr size_t kN = 3 * 65536 + 1000;
  ClusterOptions o;
  o.shard.hyper.lr = 1e-2f;
  o.shard.hyper.eps = 1e-3f;  // large enough that clipping changes the update
  o.shard.hyper.max_grad_norm = 5.0f;
  o.shard.return_path.codec = PullCodec::kDelta;
  o.shard.return_path.full_sync_every = 0;
  o.shard.apply_threads = apply_threads;
  TestCluster c(o);
  AppliedRun run;
  if (!c.Start()) {
    ADD_FAILURE() << "cluster did not start";
    return run;
  }
  std::vector<uint64_t> workers;
  for (int w = 0; w < 2; ++w) {
    v1::JoinResponse join;
    EXPECT_TRUE(c.Join(kN, &join).ok());
    workers.push_back(join.worker_id());
  }
  const auto init = RandomVector(kN, 5);
  EXPECT_TRUE(c.InitShard(0, workers[0], Fp32Payload(init, 0)).ok());
  if (ref) *ref = ReferenceAdamW(init, o.shard.hyper);
  for (uint64_t step = 0; step < 3; ++step) {
    std::vector<double> mean(kN, 0.0);
    for (size_t w = 0; w < workers.size(); ++w) {
      const auto payload = QuantPayload(RandomVector(kN, 100 * step + w, 0.1f), 0, 4, 128);
      const auto decoded = DecodeReference(payload);
      for (size_t i = 0; i < kN; ++i) mean[i] += decoded[i] / workers.size();
      EXPECT_TRUE(c.Push(0, workers[w], step, payload).ok());
    }
    if (ref) ref->Step(mean);
    v1::PullResponse resp;
    EXPECT_TRUE(c.Pull(NextVersionPull(workers[0], step), &resp).ok());
    EXPECT_TRUE(resp.is_delta()) << "step " << step;
    run.deltas.push_back(resp.params().data() + resp.params().scales());
  }
  run.final_params = PulledParams(c, 0, 3);
  return run;
}

// A server's apply threads share out the decode, AdamW and the delta's
// encoding; what the workers receive must not depend on how many there are.
TEST(Training, ApplyThreadsChangeNeitherTheParametersNorTheDeltasBitForBit) {
  ReferenceAdamW ref({}, AdamWParams{});
  const AppliedRun one = RunThreeSteps(1, &ref);
  ASSERT_EQ(one.deltas.size(), 3u);
  // The replica is within the last 8-bit delta's rounding (half a step of
  // a block's largest change / 127, about 4e-5 here) of the master.
  ASSERT_TRUE(AllNear(one.final_params, ref.params(), 2e-4));
  for (uint32_t threads : {2u, 4u}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    const AppliedRun many = RunThreeSteps(threads, nullptr);
    ASSERT_EQ(many.deltas.size(), one.deltas.size());
    for (size_t t = 0; t < one.deltas.size(); ++t) {
      EXPECT_TRUE(many.deltas[t] == one.deltas[t]) << "the delta of step " << t << " differs";
    }
    EXPECT_TRUE(many.final_params == one.final_params);
  }
}

TEST(Training, DuplicatesStaleAheadAndNonParticipantPushes) {
  ClusterOptions o;
  o.shard.hyper.lr = 1e-2f;
  o.shard.return_path.codec = PullCodec::kFp32;
  TestCluster c(o);
  ASSERT_TRUE(c.Start());
  std::vector<uint64_t> w;
  for (int i = 0; i < 4; ++i) {
    v1::JoinResponse join;
    ASSERT_TRUE(c.Join(640, &join).ok());
    w.push_back(join.worker_id());
  }
  const auto init = RandomVector(640, 3);
  ASSERT_TRUE(c.InitShard(0, w[0], Fp32Payload(init, 0)).ok());
  ReferenceAdamW ref(init, o.shard.hyper);
  auto grad = [](uint64_t step, size_t i) { return RandomVector(640, 50 * step + i); };

  // Step 0: worker 0 pushes twice; the second push is acknowledged and dropped.
  v1::PushResponse r;
  ASSERT_TRUE(c.Push(0, w[0], 0, Fp32Payload(grad(0, 0), 0), &r).ok());
  EXPECT_FALSE(r.duplicate());
  ASSERT_TRUE(c.Push(0, w[0], 0, Fp32Payload(grad(9, 9), 0), &r).ok());
  EXPECT_TRUE(r.duplicate());
  EXPECT_EQ(r.version(), 0u);
  v1::ShardStatusResponse st;
  ASSERT_TRUE(c.ShardStatus(0, &st).ok());
  EXPECT_EQ(st.pending_pushes(), 1u);
  for (size_t i = 1; i < 4; ++i) ASSERT_TRUE(c.Push(0, w[i], 0, Fp32Payload(grad(0, i), 0)).ok());
  std::vector<double> mean(640, 0.0);
  for (size_t i = 0; i < 4; ++i) {
    const auto g = grad(0, i);
    for (size_t j = 0; j < 640; ++j) mean[j] += double(g[j]) / 4;
  }
  ref.Step(mean);
  ASSERT_TRUE(AllNear(PulledParams(c, 0, 1), ref.params(), kRelTolerance));

  // Already applied, and ahead of the shard.
  auto stale = c.Push(0, w[0], 0, Fp32Payload(grad(0, 0), 0));
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(stale.error_message().find("step 0 already applied (shard at version 1)"),
            std::string::npos)
      << stale.error_message();
  auto ahead = c.Push(0, w[0], 2, Fp32Payload(grad(2, 0), 0));
  EXPECT_EQ(ahead.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(ahead.error_message().find("step 2 is ahead of the shard (version 1)"),
            std::string::npos)
      << ahead.error_message();

  // Step 1 opens (first push freezes its participants); a worker joining now
  // is not one of them.
  ASSERT_TRUE(c.Push(0, w[1], 1, Fp32Payload(grad(1, 1), 0)).ok());
  v1::JoinResponse late;
  ASSERT_TRUE(c.Join(640, &late).ok());
  auto outsider = c.Push(0, late.worker_id(), 1, Fp32Payload(grad(1, 4), 0));
  EXPECT_EQ(outsider.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(outsider.error_message().find("is not a participant of step 1"), std::string::npos)
      << outsider.error_message();
  for (size_t i : {0, 2, 3}) ASSERT_TRUE(c.Push(0, w[i], 1, Fp32Payload(grad(1, i), 0)).ok());
  std::fill(mean.begin(), mean.end(), 0.0);
  for (size_t i = 0; i < 4; ++i) {
    const auto g = grad(1, i);
    for (size_t j = 0; j < 640; ++j) mean[j] += double(g[j]) / 4;
  }
  ref.Step(mean);
  ASSERT_TRUE(AllNear(PulledParams(c, 0, 2), ref.params(), kRelTolerance));

  // Step 2 opened after the late worker joined: it takes part.
  w.push_back(late.worker_id());
  for (size_t i = 0; i < 5; ++i) ASSERT_TRUE(c.Push(0, w[i], 2, Fp32Payload(grad(2, i), 0)).ok());
  std::fill(mean.begin(), mean.end(), 0.0);
  for (size_t i = 0; i < 5; ++i) {
    const auto g = grad(2, i);
    for (size_t j = 0; j < 640; ++j) mean[j] += double(g[j]) / 5;
  }
  ref.Step(mean);
  ASSERT_TRUE(AllNear(PulledParams(c, 0, 3), ref.params(), kRelTolerance));
}

}  // namespace
}  // namespace loco::test

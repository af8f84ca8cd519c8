// A whole LoCo-PS cluster inside the test process: one coordinator, three
// parameter servers and several loco::Worker objects (each Step on its own
// thread), all over real gRPC on 127.0.0.1. After every step each worker's
// parameters are compared against ClusterReference, an independent
// recomputation (per-worker LoCo compression with the kernels, mean in
// double, AdamW in double), and the servers' versions and optimizer moments
// are checked too.
//
// Tolerances (fp32 cluster against the double reference):
//   params  |got − ref| ≤ 1e-5·(1 + |ref|)
//   m       |got − ref| ≤ 1e-5·|ref| + 1e-8
//   v       |got − ref| ≤ 1e-5·|ref| + 1e-12
// The cluster's own error is a few fp32 roundings per step: the mean of the
// decoded payloads (|δ| ≲ 2e-8 absolute for gradients ≲ 0.2), then AdamW's
// per-element fp32 arithmetic (relative ~1e-7 per step). AdamW's eps is 1e-5
// so that δ can move an update by at most lr·δ/eps ≈ 4e-6 (lr = 2e-3) even
// where the mean gradient is near 0. Measured, the differences stay below a
// tenth of each bound. A wrong payload is far outside them: one 4-bit code
// off by one in one of four workers moves the mean by ~5e-3 and m by ~5e-4
// (bound ~1e-7); a wrong error state, compensation mode, reset period or
// worker set moves m everywhere and the parameters by ~1e-4 within a step or
// two (see the discrimination checks in the tests).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/loco_compress.h"
#include "tests/cluster/test_cluster.h"
#include "tests/integration/cluster_reference.h"
#include "tests/integration/step_round.h"
#include "client/worker.h"

namespace loco::test {
namespace {

constexpr uint32_t kServers = 3;
constexpr uint32_t kAlign = 4096;
constexpr int kBlock = 128;
// A multiple of neither the block size, nor the server count, nor the
// alignment.
constexpr size_t kElements = 3 * 4096 * 2 + 779;  // 25355
static_assert(kElements % kBlock != 0 && kElements % kServers != 0 && kElements % kAlign != 0);
// The shard map by shard_layout.h's closed form: ceil(25355 / 4096) = 7
// aligned blocks (the last holds 779 elements), split 3/2/2, larger first.
const std::vector<ShardRange> kShardMap = {{0, 12288}, {12288, 8192}, {20480, 4875}};
// Shard 2 = 38 full quantization blocks and a tail block of 11 elements.
static_assert(20480 + 4875 == kElements && 4875 % kBlock == 11);

// LoCo settings given explicitly to every worker (and to the reference).
constexpr float kBeta = 0.6f;
constexpr int64_t kResetPeriod = 4;  // ê is reset after steps 3 and 7

AdamWParams Hyper() {
  AdamWParams h;
  h.lr = 2e-3f;
  h.beta1 = 0.9f;
  h.beta2 = 0.99f;
  h.eps = 1e-5f;
  h.weight_decay = 0.01f;
  return h;
}

struct Codec {
  PushCodec codec;  // WorkerOptions::codec
  CompressionConfig config;
  int steps = 0;
};

Codec MakeCodec(PushCodec codec, CompensationMode mode, int bits, int steps) {
  Codec c;
  c.codec = codec;
  c.config.mode = mode;
  c.config.bits = bits;
  c.config.block_size = kBlock;
  c.config.beta = kBeta;
  c.config.reset_period = kResetPeriod;
  c.config.error_bits = 8;
  c.steps = steps;
  return c;
}

const Codec kLoco4 = MakeCodec(PushCodec::kLoco, CompensationMode::kLoco, 4, 8);

// For gtest's messages about a parameterised test.
void PrintTo(const Codec& c, std::ostream* os) {
  *os << PushCodecName(c.codec) << " " << c.config.bits << "-bit, " << c.steps << " steps";
}

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::vector<float> Uniform(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(Mix(seed));
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Worker `worker`'s gradient at `step`: a per-element trend shared by all
// workers plus noise of its own, so that every worker and step differ.
std::vector<float> Gradient(int worker, int64_t step) {
  static const std::vector<float> trend = Uniform(kElements, 7, -0.1f, 0.1f);
  std::vector<float> g =
      Uniform(kElements, 1000 + 100 * static_cast<uint64_t>(worker) + static_cast<uint64_t>(step),
              -0.05f, 0.05f);
  for (size_t i = 0; i < kElements; ++i) g[i] += trend[i];
  return g;
}

// |actual − expected| ≤ rel·|expected| + abs for every element; reports how
// many differ and the worst one.
::testing::AssertionResult AllNear(const std::vector<float>& actual,
                                   const std::vector<double>& expected, double rel, double abs,
                                   size_t offset = 0) {
  if (actual.size() + offset > expected.size()) {
    return ::testing::AssertionFailure() << actual.size() << " values at offset " << offset
                                         << " do not fit in " << expected.size();
  }
  size_t bad = 0, worst = 0;
  double worst_excess = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double e = expected[offset + i];
    const double bound = rel * std::abs(e) + abs;
    const double diff = std::abs(static_cast<double>(actual[i]) - e);
    if (!(diff <= bound)) {
      ++bad;
      if (!(diff - bound <= worst_excess)) {
        worst_excess = diff - bound;
        worst = i;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << actual.size() << " values out of tolerance; worst at element "
         << offset + worst << ": got " << actual[worst] << ", want " << expected[offset + worst]
         << " (bound " << rel * std::abs(expected[offset + worst]) + abs << ")";
}

struct TrainingWorker {
  int id = 0;
  std::unique_ptr<Worker> worker;
  std::vector<float> params;
};

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.num_shards = kServers;
    o.shard_align = kAlign;
    // Long enough that no worker expires during a test: departures in these
    // tests are explicit Leave calls, never missed heartbeats.
    o.heartbeat_timeout = std::chrono::milliseconds(30000);
    o.heartbeat_interval = std::chrono::milliseconds(200);
    o.shard.hyper = Hyper();
    o.shard.return_path.codec = PullCodec::kFp32;  // exact fp32 pulls
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_TRUE(cluster_->Start());
  }

  WorkerOptions Options(const Codec& codec, int id) const {
    WorkerOptions o;
    o.security = TransportSecurityOptions::Insecure();  // loopback
    o.coordinator = cluster_->coordinator_address();
    o.name = "worker-" + std::to_string(id);
    o.codec = codec.codec;
    o.bits = codec.config.bits;
    o.block_size = codec.config.block_size;
    o.beta = codec.config.beta;
    o.reset_period = codec.config.reset_period;
    o.stochastic_rounding = false;
    o.error_bits = codec.config.error_bits;
    // Every wait bounded well inside the test's budget; the heartbeat
    // timeout (30 s) is longer, so a server that waited for a departed
    // worker until it expired would make Step fail here.
    o.rpc_timeout_ms = 5000;
    o.pull_wait_ms = 2000;
    o.step_timeout_ms = 10000;
    o.join_timeout_ms = 10000;
    o.max_retries = 3;
    return o;
  }

  // Connects, joins and initialises worker `id`; `initial` is what it offers
  // (first writer wins, so only the first worker's offer counts).
  void AddWorker(const Codec& codec, int id, const std::vector<float>& initial,
                 std::vector<TrainingWorker>* workers) {
    auto w = Worker::Connect(Options(codec, id));
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    TrainingWorker tw;
    tw.id = id;
    tw.worker = std::move(w).value();
    const Status joined = tw.worker->Join(kElements);
    ASSERT_TRUE(joined.ok()) << joined.ToString();
    const Status init = tw.worker->InitParameters(initial, &tw.params);
    ASSERT_TRUE(init.ok()) << init.ToString();
    workers->push_back(std::move(tw));
  }

  // One synchronous step `step` of `workers` (one thread each); feeds the
  // same gradients to `ref` and checks the outcome.
  void RunStep(int64_t step, std::vector<TrainingWorker*> workers, ClusterReference* ref) {
    std::map<int, std::vector<float>> grads;
    for (TrainingWorker* w : workers) grads[w->id] = Gradient(w->id, step);
    StepRound round;
    std::vector<StepRound::Member> members;
    for (TrainingWorker* w : workers) {
      members.push_back({w->worker.get(), &w->params, &grads[w->id]});
    }
    round.Start(std::move(members));
    const auto results = round.Finish();
    ASSERT_TRUE(ref->Step(step, grads));
    CheckStep(step, workers, results, *ref);
  }

  void CheckStep(int64_t step, const std::vector<TrainingWorker*>& workers,
                 const std::vector<StatusOr<StepResult>>& results, const ClusterReference& ref) {
    const uint64_t version = static_cast<uint64_t>(step) + 1;
    ASSERT_EQ(results.size(), workers.size());
    for (size_t i = 0; i < workers.size(); ++i) {
      SCOPED_TRACE("worker " + std::to_string(workers[i]->id) + ", step " + std::to_string(step));
      ASSERT_TRUE(results[i].ok()) << results[i].status().ToString();
      EXPECT_EQ(results[i]->step, static_cast<uint64_t>(step));
      EXPECT_FALSE(results[i]->resynced);
      EXPECT_EQ(results[i]->nonfinite, 0u);
      EXPECT_EQ(workers[i]->worker->step(), version);
      // Every worker pulled the same fp32 master.
      EXPECT_EQ(workers[i]->params, workers[0]->params);
      EXPECT_TRUE(AllNear(workers[i]->params, ref.params(), 1e-5, 1e-5));
    }
    for (uint32_t k = 0; k < kServers; ++k) {
      SCOPED_TRACE("shard " + std::to_string(k) + ", step " + std::to_string(step));
      v1::ShardStatusResponse st;
      const grpc::Status got = cluster_->ShardStatus(k, &st);
      ASSERT_TRUE(got.ok()) << "ShardStatus(" << k << "): " << got.error_message();
      EXPECT_TRUE(st.initialized());
      EXPECT_EQ(st.version(), version);
      EXPECT_EQ(st.offset(), kShardMap[k].offset);
      EXPECT_EQ(st.length(), kShardMap[k].length);
      EXPECT_EQ(st.pending_pushes(), 0u);
      const ShardStore s = cluster_->Snapshot(k);
      EXPECT_EQ(s.version(), version);
      EXPECT_TRUE(AllNear(s.m(), ref.m(), 1e-5, 1e-8, kShardMap[k].offset));
      EXPECT_TRUE(AllNear(s.v(), ref.v(), 1e-5, 1e-12, kShardMap[k].offset));
    }
    // Later steps would only repeat a disagreement; stop at the first one.
    ASSERT_FALSE(HasFailure()) << "step " << step << " disagrees with the reference";
  }

  static std::vector<TrainingWorker*> Pointers(std::vector<TrainingWorker>& workers) {
    std::vector<TrainingWorker*> out;
    for (auto& w : workers) out.push_back(&w);
    return out;
  }

  // Declared first: destroyed after the tests' workers have left.
  std::unique_ptr<TestCluster> cluster_;
};

// ---------------------------------------------------------------- codecs

class CodecRunTest : public ClusterTest, public ::testing::WithParamInterface<Codec> {};

TEST_P(CodecRunTest, FourWorkersMatchTheReferenceAfterEveryStep) {
  const Codec& codec = GetParam();
  const std::vector<float> init = Uniform(kElements, 1, -1.0f, 1.0f);
  const std::vector<float> other = Uniform(kElements, 2, -1.0f, 1.0f);
  std::vector<TrainingWorker> workers;
  for (int id = 0; id < 4; ++id) {
    // Worker 0 initialises the shards; the others' offers are ignored.
    ASSERT_NO_FATAL_FAILURE(AddWorker(codec, id, id == 0 ? init : other, &workers));
    EXPECT_EQ(workers.back().worker->step(), 0u);
    EXPECT_EQ(workers.back().params, init);
  }
  ClusterReference ref(codec.config, Hyper(), kShardMap, init);
  // A reference that differs only in the compensation mode: the checks must
  // be able to tell it apart from the cluster (they have teeth).
  CompressionConfig wrong = codec.config;
  wrong.mode = codec.config.mode == CompensationMode::kNaive ? CompensationMode::kEf
                                                             : CompensationMode::kNaive;
  ClusterReference shadow(wrong, Hyper(), kShardMap, init);
  for (int id = 0; id < 4; ++id) {
    ref.AddWorker(id);
    shadow.AddWorker(id);
  }
  for (int64_t t = 0; t < codec.steps; ++t) {
    ASSERT_NO_FATAL_FAILURE(RunStep(t, Pointers(workers), &ref));
    std::map<int, std::vector<float>> grads;
    for (int id = 0; id < 4; ++id) grads[id] = Gradient(id, t);
    ASSERT_TRUE(shadow.Step(t, grads));
  }
  // Step 0 is identical in all modes (ê = 0); the error states diverge after.
  EXPECT_FALSE(AllNear(cluster_->Snapshot(0).m(), shadow.m(), 1e-5, 1e-8))
      << "a reference with another compensation mode matches too: the check has no teeth";
  // 4 workers × `steps` accepted pushes of the block codec's size.
  size_t wire = 0;
  for (const ShardRange& r : kShardMap) {
    wire += PackedBytes(r.length, codec.config.bits) + 4 * NumBlocks(r.length, kBlock);
  }
  for (const TrainingWorker& w : workers) {
    const TrafficStats tr = w.worker->traffic();
    EXPECT_EQ(tr.push_wire_bytes, wire * static_cast<size_t>(codec.steps));
    EXPECT_EQ(tr.resyncs, 0u);
  }
  for (TrainingWorker& w : workers) EXPECT_TRUE(w.worker->Leave().ok());
}

INSTANTIATE_TEST_SUITE_P(Codecs, CodecRunTest,
                         ::testing::Values(kLoco4, MakeCodec(PushCodec::kEf, CompensationMode::kEf, 2, 4),
                                           MakeCodec(PushCodec::kNaive, CompensationMode::kNaive, 8, 4)),
                         [](const ::testing::TestParamInfo<Codec>& info) {
                           return PushCodecName(info.param.codec) + std::to_string(info.param.config.bits) + "bit";
                         });

// ---------------------------------------------------------------- membership

TEST_F(ClusterTest, JoinerBetweenStepsGetsTheCurrentVersionAndCountsFromTheNextStep) {
  const std::vector<float> init = Uniform(kElements, 3, -1.0f, 1.0f);
  std::vector<TrainingWorker> workers;
  for (int id = 0; id < 2; ++id) ASSERT_NO_FATAL_FAILURE(AddWorker(kLoco4, id, init, &workers));
  ClusterReference ref(kLoco4.config, Hyper(), kShardMap, init);
  ClusterReference two_only(kLoco4.config, Hyper(), kShardMap, init);  // ignores the joiner
  for (int id = 0; id < 2; ++id) {
    ref.AddWorker(id);
    two_only.AddWorker(id);
  }
  for (int64_t t = 0; t < 3; ++t) {
    ASSERT_NO_FATAL_FAILURE(RunStep(t, Pointers(workers), &ref));
    ASSERT_TRUE(two_only.Step(t, {{0, Gradient(0, t)}, {1, Gradient(1, t)}}));
  }

  // The joiner offers other values; it must receive version 3 in full fp32,
  // bit for bit what the others hold.
  ASSERT_NO_FATAL_FAILURE(AddWorker(kLoco4, 2, Uniform(kElements, 4, -1.0f, 1.0f), &workers));
  EXPECT_EQ(workers[2].worker->step(), 3u);
  EXPECT_EQ(workers[2].params, workers[0].params);
  ref.AddWorker(2);

  for (int64_t t = 3; t < 6; ++t) {
    ASSERT_NO_FATAL_FAILURE(RunStep(t, Pointers(workers), &ref));
    ASSERT_TRUE(two_only.Step(t, {{0, Gradient(0, t)}, {1, Gradient(1, t)}}));
    // The mean covered three workers: a two-worker mean is out of tolerance.
    EXPECT_FALSE(AllNear(workers[0].params, two_only.params(), 1e-5, 1e-5))
        << "step " << t << ": a mean over two workers matches too: the check has no teeth";
  }
  for (TrainingWorker& w : workers) EXPECT_TRUE(w.worker->Leave().ok());
}

// A worker leaves after step 2: either between steps, or while step 3 is
// open and already holds the others' pushes (it was frozen as a participant
// of step 3 and never pushes). Either way the remaining workers' steps
// complete within their step timeout (10 s, shorter than the 30 s heartbeat
// expiry), averaging over the remaining workers only.
class LeaveTest : public ClusterTest, public ::testing::WithParamInterface<bool> {};

TEST_P(LeaveTest, RemainingWorkersCarryOnWithoutTheLeaver) {
  const bool leave_while_step_open = GetParam();
  const std::vector<float> init = Uniform(kElements, 5, -1.0f, 1.0f);
  std::vector<TrainingWorker> workers;
  for (int id = 0; id < 3; ++id) ASSERT_NO_FATAL_FAILURE(AddWorker(kLoco4, id, init, &workers));
  ClusterReference ref(kLoco4.config, Hyper(), kShardMap, init);
  for (int id = 0; id < 3; ++id) ref.AddWorker(id);
  for (int64_t t = 0; t < 3; ++t) ASSERT_NO_FATAL_FAILURE(RunStep(t, Pointers(workers), &ref));

  TrainingWorker& leaver = workers[2];
  std::vector<TrainingWorker*> remaining = {&workers[0], &workers[1]};
  if (!leave_while_step_open) {
    ASSERT_TRUE(leaver.worker->Leave().ok());
    ASSERT_NO_FATAL_FAILURE(RunStep(3, remaining, &ref));
  } else {
    std::map<int, std::vector<float>> grads = {{0, Gradient(0, 3)}, {1, Gradient(1, 3)}};
    StepRound round;
    round.Start({{workers[0].worker.get(), &workers[0].params, &grads[0]},
                 {workers[1].worker.get(), &workers[1].params, &grads[1]}});
    // Step 3 is open on every shard with both remaining pushes held: it
    // waits for the leaver now.
    const bool held = cluster_->WaitForPendingPushes(2, std::chrono::seconds(5));
    const Status left = leaver.worker->Leave();
    const auto results = round.Finish();
    ASSERT_TRUE(held) << "the remaining workers' pushes for step 3 did not arrive within 5 s";
    ASSERT_TRUE(left.ok()) << left.ToString();
    ASSERT_TRUE(ref.Step(3, grads));
    ASSERT_NO_FATAL_FAILURE(CheckStep(3, remaining, results, ref));
  }
  for (int64_t t = 4; t < 6; ++t) ASSERT_NO_FATAL_FAILURE(RunStep(t, remaining, &ref));

  auto r = leaver.worker->Step(Gradient(2, 6), &leaver.params);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  for (TrainingWorker* w : remaining) EXPECT_TRUE(w->worker->Leave().ok());
}

INSTANTIATE_TEST_SUITE_P(ClusterTest, LeaveTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("WhileStepOpen")
                                             : std::string("BetweenSteps");
                         });

}  // namespace
}  // namespace loco::test

// ShardMachine driven directly, with no server and no coordinator: the
// cluster view and the step's participants come from plain data
// (FakeMembership). A step's result is checked against AdamW in double
// (ReferenceAdamW) on the mean gradient the test computes itself; refusals
// are checked to leave every piece of state byte for byte as it was.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "server/membership_source.h"
#include "server/push_assembler.h"
#include "server/shard_machine.h"
#include "tests/server/reference.h"
#include "tests/server/shard_machine_fixture.h"

namespace loco::test {
namespace {

constexpr uint64_t kMachineLength = 1000;  // not a multiple of the 128 block: a short last block
constexpr uint64_t kWorkerA = 1, kWorkerB = 2;



v1::PushRequest PushOf(uint64_t worker, uint64_t step, const v1::Payload& gradient) {
  v1::PushRequest req;
  req.set_worker_id(worker);
  req.set_shard_id(0);
  req.set_step(step);
  *req.mutable_gradient() = gradient;
  return req;
}

v1::PullRequest PullFor(uint64_t worker, uint64_t min_version, uint32_t wait_ms) {
  v1::PullRequest req;
  req.set_worker_id(worker);
  req.set_shard_id(0);
  req.set_min_version(min_version);
  req.set_wait_ms(wait_ms);
  return req;
}

void SetFloat(std::string* bytes, size_t index, float value) {
  std::memcpy(bytes->data() + 4 * index, &value, 4);
}

class ShardMachineTest : public ::testing::Test {
 protected:
  ShardMachineTest() : shard_(FixtureMachineOptions(), &membership_) {}

  void SetUp() override {
    ASSERT_TRUE(ShardMachine::ValidateOptions(FixtureMachineOptions()).ok());
    init_ = RandomVector(kMachineLength, 11);
    v1::InitShardRequest req;
    req.set_worker_id(kWorkerA);
    req.set_shard_id(0);
    *req.mutable_params() = Fp32Payload(init_, 0);
    v1::InitShardResponse resp;
    const Status s = shard_.InitShard(req, &resp);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(resp.version(), 0u);
  }

  Status Push(uint64_t worker, uint64_t step, const v1::Payload& gradient,
              v1::PushResponse* resp = nullptr) {
    v1::PushRequest req = PushOf(worker, step, gradient);
    v1::PushResponse ignored;
    return shard_.Push(&req, resp ? resp : &ignored);
  }

  FakeMembership membership_{{kWorkerA, kWorkerB}, 0, kMachineLength, kMachineLength};
  ShardMachine shard_;
  std::vector<float> init_;
};

TEST_F(ShardMachineTest, InitialisesOnceFromTheFirstWriter) {
  const ShardStore store = shard_.Snapshot();
  EXPECT_TRUE(store.initialized());
  EXPECT_EQ(store.version(), 0u);
  EXPECT_TRUE(SameBytes(store.params(), init_));
  EXPECT_TRUE(shard_.range_known());

  const CapturedShard before = Capture(shard_);
  v1::InitShardRequest again;
  again.set_worker_id(kWorkerB);
  *again.mutable_params() = Fp32Payload(RandomVector(kMachineLength, 12), 0);
  v1::InitShardResponse resp;
  EXPECT_EQ(shard_.InitShard(again, &resp).code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(Unchanged(before, Capture(shard_)));
}

TEST_F(ShardMachineTest, TwoPushesOfAStepApplyAdamWOnTheirMean) {
  ReferenceAdamW reference(init_, FixtureMachineOptions().hyper);
  for (uint64_t step = 0; step < 2; ++step) {
    const auto a = RandomVector(kMachineLength, 20 + 2 * step);
    const auto b = RandomVector(kMachineLength, 21 + 2 * step);
    v1::PushResponse resp;
    ASSERT_TRUE(Push(kWorkerA, step, Fp32Payload(a, 0), &resp).ok());
    EXPECT_EQ(resp.version(), step) << "one of two participants: the step waits";
    EXPECT_FALSE(resp.duplicate());
    EXPECT_EQ(shard_.pending_pushes(), 1u);
    ASSERT_TRUE(Push(kWorkerB, step, Fp32Payload(b, 0), &resp).ok());
    EXPECT_EQ(resp.version(), step + 1) << "the second push completes the step";
    EXPECT_EQ(shard_.pending_pushes(), 0u);

    reference.Step(MeanOfTwo(a, b));
    const ShardStore store = shard_.Snapshot();
    EXPECT_EQ(store.version(), step + 1);
    EXPECT_TRUE(AllNear(store.params(), reference.params(), 1e-5)) << "step " << step;
  }
  // The moments after two steps, in closed form from the two means.
  const auto g0 = MeanOfTwo(RandomVector(kMachineLength, 20), RandomVector(kMachineLength, 21));
  const auto g1 = MeanOfTwo(RandomVector(kMachineLength, 22), RandomVector(kMachineLength, 23));
  const double b1 = FixtureMachineOptions().hyper.beta1, b2 = FixtureMachineOptions().hyper.beta2;
  std::vector<double> m(kMachineLength), v(kMachineLength);
  for (size_t i = 0; i < kMachineLength; ++i) {
    m[i] = b1 * (1 - b1) * g0[i] + (1 - b1) * g1[i];
    v[i] = b2 * (1 - b2) * g0[i] * g0[i] + (1 - b2) * g1[i] * g1[i];
  }
  const ShardStore store = shard_.Snapshot();
  EXPECT_TRUE(AllNear(store.m(), m, 1e-5));
  EXPECT_TRUE(AllNear(store.v(), v, 1e-5));
}

// The buffers of a step's pushes serve the step's fp32 answer and then the
// next step's pushes (server/payload_buffers.h): no step after the first
// allocates one, and the reused bytes change no result.
TEST_F(ShardMachineTest, AStepsPushBuffersServeTheAnswerAndTheNextStepsPushes) {
  ReferenceAdamW reference(init_, FixtureMachineOptions().hyper);
  std::vector<const char*> step0_buffers;
  for (uint64_t worker : {kWorkerA, kWorkerB}) {
    v1::PushRequest req =
        PushOf(worker, 0, Fp32Payload(RandomVector(kMachineLength, 30 + worker), 0));
    step0_buffers.push_back(req.gradient().data().data());  // moves into the payload
    v1::PushResponse resp;
    ASSERT_TRUE(shard_.Push(&req, &resp).ok());
  }
  reference.Step(MeanOfTwo(RandomVector(kMachineLength, 30 + kWorkerA),
                        RandomVector(kMachineLength, 30 + kWorkerB)));
  const auto reused = [&](const char* p) {
    return p == step0_buffers[0] || p == step0_buffers[1];
  };
  EXPECT_EQ(shard_.push_buffers().spares(), 2u);

  // Both workers pull version 1: one answer, in one of the step's buffers.
  std::vector<ReturnPath::SharedBody> bodies(2);
  for (size_t k = 0; k < 2; ++k) {
    v1::PullResponse header;
    ASSERT_TRUE(shard_.Pull(PullFor(k == 0 ? kWorkerA : kWorkerB, 1, 1000), &header, &bodies[k])
                    .ok());
  }
  EXPECT_EQ(bodies[0].data, bodies[1].data);
  EXPECT_TRUE(reused(bodies[0].data->data()));
  EXPECT_EQ(shard_.push_buffers().spares(), 1u);
  std::vector<float> pulled(kMachineLength);
  ASSERT_EQ(bodies[0].data->size(), 4 * kMachineLength);
  std::memcpy(pulled.data(), bodies[0].data->data(), 4 * kMachineLength);
  EXPECT_TRUE(SameBytes(pulled, shard_.Snapshot().params()));
  // Every worker has its answer (the shard dropped its cache); the last
  // reference gives the buffer back.
  bodies.clear();
  EXPECT_EQ(shard_.push_buffers().spares(), 2u);

  // Step 1's pushes, placed streams as the workers send them, assemble into
  // the two buffers, whose old bytes never reach the mean.
  for (uint64_t worker : {kWorkerA, kWorkerB}) {
    const v1::PushRequest full =
        PushOf(worker, 1, Fp32Payload(RandomVector(kMachineLength, 40 + worker), 0));
    v1::PushChunk header;
    *header.mutable_header() = full;
    header.mutable_header()->mutable_gradient()->clear_data();
    header.set_placed(true);
    v1::PushChunk back, front;
    back.set_data(full.gradient().data().substr(2000));
    back.set_data_offset(2000);
    front.set_data(full.gradient().data().substr(0, 2000));
    PushAssembler assembler(4 * kMachineLength, &shard_.push_buffers());
    for (v1::PushChunk* c : {&header, &back, &front}) ASSERT_TRUE(assembler.Add(c).ok());
    auto req = assembler.Finish();
    ASSERT_TRUE(req.ok()) << req.status().ToString();
    EXPECT_TRUE(reused(req->gradient().data().data()));
    v1::PushResponse resp;
    ASSERT_TRUE(shard_.Push(&*req, &resp).ok());
  }
  EXPECT_EQ(shard_.Snapshot().version(), 2u);
  reference.Step(MeanOfTwo(RandomVector(kMachineLength, 40 + kWorkerA),
                        RandomVector(kMachineLength, 40 + kWorkerB)));
  EXPECT_TRUE(AllNear(shard_.Snapshot().params(), reference.params(), 1e-5));
}

TEST_F(ShardMachineTest, ADuplicatePushIsAcceptedOnceAndTheFirstPayloadCounts) {
  const auto first = RandomVector(kMachineLength, 30);
  const auto other = RandomVector(kMachineLength, 31);
  const auto b = RandomVector(kMachineLength, 32);
  ASSERT_TRUE(Push(kWorkerA, 0, Fp32Payload(first, 0)).ok());
  const CapturedShard before = Capture(shard_);
  v1::PushResponse resp;
  ASSERT_TRUE(Push(kWorkerA, 0, Fp32Payload(other, 0), &resp).ok());
  EXPECT_TRUE(resp.duplicate());
  EXPECT_EQ(resp.version(), 0u);
  EXPECT_TRUE(Unchanged(before, Capture(shard_)));

  ASSERT_TRUE(Push(kWorkerB, 0, Fp32Payload(b, 0)).ok());
  ReferenceAdamW reference(init_, FixtureMachineOptions().hyper);
  reference.Step(MeanOfTwo(first, b));
  EXPECT_EQ(shard_.Snapshot().version(), 1u);
  EXPECT_TRUE(AllNear(shard_.Snapshot().params(), reference.params(), 1e-5));
}

TEST_F(ShardMachineTest, APushForAnAppliedStepIsRefusedAndChangesNothing) {
  ASSERT_TRUE(Push(kWorkerA, 0, Fp32Payload(RandomVector(kMachineLength, 40), 0)).ok());
  ASSERT_TRUE(Push(kWorkerB, 0, Fp32Payload(RandomVector(kMachineLength, 41), 0)).ok());
  ASSERT_TRUE(Push(kWorkerA, 1, Fp32Payload(RandomVector(kMachineLength, 42), 0)).ok());
  const CapturedShard before = Capture(shard_);
  ASSERT_EQ(before.version, 1u);
  ASSERT_EQ(before.pending, 1u);

  const Status late = Push(kWorkerB, 0, Fp32Payload(RandomVector(kMachineLength, 43), 0));
  EXPECT_EQ(late.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(late.message().find("already applied"), std::string::npos) << late.message();
  EXPECT_TRUE(Unchanged(before, Capture(shard_)));

  const Status ahead = Push(kWorkerB, 5, Fp32Payload(RandomVector(kMachineLength, 44), 0));
  EXPECT_EQ(ahead.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Unchanged(before, Capture(shard_)));
}

TEST_F(ShardMachineTest, BadPushesAreRefusedAndChangeNothing) {
  // A populated state: one step applied (m and v non-zero), one push held.
  ASSERT_TRUE(Push(kWorkerA, 0, Fp32Payload(RandomVector(kMachineLength, 50), 0)).ok());
  ASSERT_TRUE(Push(kWorkerB, 0, Fp32Payload(RandomVector(kMachineLength, 51), 0)).ok());
  ASSERT_TRUE(Push(kWorkerA, 1, QuantPayload(RandomVector(kMachineLength, 52), 0, 4, 128)).ok());
  const CapturedShard before = Capture(shard_);
  const v1::Payload valid = QuantPayload(RandomVector(kMachineLength, 53), 0, 4, 128);

  v1::PushRequest wrong_shard = PushOf(kWorkerB, 1, valid);
  wrong_shard.set_shard_id(1);
  v1::PushResponse resp;
  EXPECT_EQ(shard_.Push(&wrong_shard, &resp).code(), StatusCode::kNotFound);
  EXPECT_TRUE(Unchanged(before, Capture(shard_)));

  v1::Payload short_payload = Fp32Payload(RandomVector(kMachineLength - 1, 54), 0);
  EXPECT_EQ(Push(kWorkerB, 1, short_payload).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Unchanged(before, Capture(shard_)));

  v1::Payload short_data = valid;
  short_data.mutable_data()->pop_back();
  EXPECT_EQ(Push(kWorkerB, 1, short_data).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Unchanged(before, Capture(shard_)));

  for (const float bad : {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    v1::Payload bad_scale = valid;
    SetFloat(bad_scale.mutable_scales(), 3, bad);
    const Status s = Push(kWorkerB, 1, bad_scale);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(Unchanged(before, Capture(shard_))) << bad;
  }

  v1::Payload nan_value = Fp32Payload(RandomVector(kMachineLength, 55), 0);
  SetFloat(nan_value.mutable_data(), 500, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(Push(kWorkerB, 1, nan_value).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Unchanged(before, Capture(shard_)));

  // The valid push still completes the step afterwards.
  ASSERT_TRUE(Push(kWorkerB, 1, valid).ok());
  EXPECT_EQ(shard_.Snapshot().version(), 2u);
}

TEST_F(ShardMachineTest, APullWaitsForItsVersionAndTheStepReleasesIt) {
  ASSERT_TRUE(Push(kWorkerA, 0, Fp32Payload(RandomVector(kMachineLength, 60), 0)).ok());
  std::atomic<bool> returned{false};
  Status pulled;
  v1::PullResponse resp;
  const auto start = std::chrono::steady_clock::now();
  std::thread puller([&] {
    pulled = shard_.Pull(PullFor(kWorkerA, 1, 15000), &resp);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(returned.load()) << "the pull returned before version 1 existed";
  ASSERT_TRUE(Push(kWorkerB, 0, Fp32Payload(RandomVector(kMachineLength, 61), 0)).ok());
  puller.join();
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(pulled.ok()) << pulled.ToString();
  EXPECT_LT(waited, std::chrono::seconds(10)) << "released by the step, not by its deadline";
  EXPECT_EQ(resp.version(), 1u);
  EXPECT_EQ(resp.params().codec(), v1::CODEC_FP32);
  EXPECT_TRUE(SameBytes(FloatsOf(resp.params().data()), shard_.Snapshot().params()));
}

TEST_F(ShardMachineTest, APullForAVersionThatDoesNotComeEndsAtItsDeadline) {
  const CapturedShard before = Capture(shard_);
  for (const uint32_t wait_ms : {0u, 150u}) {
    v1::PullResponse resp;
    const auto start = std::chrono::steady_clock::now();
    const Status s = shard_.Pull(PullFor(kWorkerA, 1, wait_ms), &resp);
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
    EXPECT_GE(waited, std::chrono::milliseconds(wait_ms));
    EXPECT_LT(waited, std::chrono::milliseconds(wait_ms) + std::chrono::seconds(5));
  }
  EXPECT_TRUE(Unchanged(before, Capture(shard_)));
}

TEST(ShardMachineOptions, APullWaitsAtMostMaxPullWait) {
  FakeMembership membership{{kWorkerA, kWorkerB}, 0, kMachineLength, kMachineLength};
  ShardMachineOptions o;
  o.return_path.codec = PullCodec::kFp32;
  o.max_pull_wait = std::chrono::milliseconds(100);
  ShardMachine shard(o, &membership);
  v1::PullResponse resp;
  const auto start = std::chrono::steady_clock::now();
  const Status s = shard.Pull(PullFor(kWorkerA, 0, 60000), &resp);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << "never initialised: " << s.ToString();
  EXPECT_GE(waited, std::chrono::milliseconds(100));
  EXPECT_LT(waited, std::chrono::seconds(10));
}

TEST_F(ShardMachineTest, StopReleasesAWaitingPull) {
  Status pulled;
  v1::PullResponse resp;
  std::thread puller([&] { pulled = shard_.Pull(PullFor(kWorkerA, 1, 15000), &resp); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  shard_.Stop();
  puller.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(pulled.code(), StatusCode::kUnavailable) << pulled.ToString();
}

TEST_F(ShardMachineTest, AStepsParticipantsAreFetchedOnceAndCached) {
  ASSERT_TRUE(Push(kWorkerA, 0, Fp32Payload(RandomVector(kMachineLength, 70), 0)).ok());
  ASSERT_TRUE(Push(kWorkerB, 0, Fp32Payload(RandomVector(kMachineLength, 71), 0)).ok());
  EXPECT_EQ(membership_.participant_calls(), 1);
}

}  // namespace
}  // namespace loco::test

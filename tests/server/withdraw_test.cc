// Withdrawals from a step (PushRequest.withdraw) on a ShardMachine without
// gRPC: a participant whose push was refused for good tells the shard not to
// wait for it. The step then completes with the other participants'
// payloads (checked against plain AdamW on their mean), a malformed or
// out-of-place withdrawal is refused and changes nothing, a repeated one is
// acknowledged once, a push after it is taken, and the next step waits for
// the worker again.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "server/shard_machine.h"
#include "tests/server/reference.h"
#include "tests/server/shard_machine_fixture.h"

namespace loco::test {
namespace {

constexpr uint64_t kTotal = 4096;
constexpr uint64_t kOffset = 1024;
constexpr uint64_t kLength = 1000;
constexpr uint64_t kA = 1, kB = 2, kC = 3;

class WithdrawTest : public ::testing::Test {
 protected:
  WithdrawTest() : shard_(FixtureMachineOptions(), &membership_) {}

  void SetUp() override {
    init_ = RandomVector(kLength, 21);
    v1::InitShardRequest req;
    req.set_worker_id(kA);
    req.set_shard_id(0);
    *req.mutable_params() = Fp32Payload(init_, kOffset);
    v1::InitShardResponse resp;
    const Status s = shard_.InitShard(req, &resp);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  Status Push(uint64_t worker, uint64_t step, const std::vector<float>& gradient) {
    v1::PushRequest req;
    req.set_worker_id(worker);
    req.set_shard_id(0);
    req.set_step(step);
    *req.mutable_gradient() = Fp32Payload(gradient, kOffset);
    v1::PushResponse resp;
    return shard_.Push(&req, &resp);
  }

  static v1::PushRequest Withdrawal(uint64_t worker, uint64_t step) {
    v1::PushRequest req;
    req.set_worker_id(worker);
    req.set_shard_id(0);
    req.set_step(step);
    req.set_withdraw(true);
    return req;
  }
  Status Withdraw(v1::PushRequest req, v1::PushResponse* resp) { return shard_.Push(&req, resp); }
  Status Withdraw(uint64_t worker, uint64_t step, bool* duplicate = nullptr) {
    v1::PushResponse resp;
    const Status s = Withdraw(Withdrawal(worker, step), &resp);
    if (duplicate != nullptr) *duplicate = resp.duplicate();
    return s;
  }

  FakeMembership membership_{{kA, kB, kC}, kOffset, kLength, kTotal};
  ShardMachine shard_;
  std::vector<float> init_;
};

TEST_F(WithdrawTest, AWithdrawalCompletesTheStepWithTheOtherParticipantsPayloads) {
  const auto ga = RandomVector(kLength, 30), gc = RandomVector(kLength, 31);
  ASSERT_TRUE(Push(kA, 0, ga).ok());
  bool duplicate = true;
  ASSERT_TRUE(Withdraw(kB, 0, &duplicate).ok());
  EXPECT_FALSE(duplicate);
  EXPECT_EQ(shard_.Snapshot().version(), 0u) << "completed while C had not pushed";
  ASSERT_TRUE(Withdraw(kB, 0, &duplicate).ok());
  EXPECT_TRUE(duplicate) << "a repeated withdrawal is acknowledged once";
  ASSERT_TRUE(Push(kC, 0, gc).ok());

  const ShardStore store = shard_.Snapshot();
  ASSERT_EQ(store.version(), 1u);
  ReferenceAdamW reference(init_, FixtureMachineOptions().hyper);
  reference.Step(MeanOfTwo(ga, gc));
  EXPECT_TRUE(AllNear(store.params(), reference.params(), 1e-5));
}

TEST_F(WithdrawTest, AMalformedOrOutOfPlaceWithdrawalIsRefusedAndChangesNothing) {
  ASSERT_TRUE(Push(kA, 0, RandomVector(kLength, 40)).ok());
  const CapturedShard held = Capture(shard_);
  struct Case {
    std::string what;
    v1::PushRequest req;
    StatusCode code;
    std::string message;
  };
  std::vector<Case> cases;
  v1::PushRequest with_gradient = Withdrawal(kB, 0);
  *with_gradient.mutable_gradient() = Fp32Payload(RandomVector(kLength, 41), kOffset);
  cases.push_back({"a gradient", with_gradient, StatusCode::kInvalidArgument,
                   "carries no gradient and no hyper-parameters"});
  v1::PushRequest with_hyper = Withdrawal(kB, 0);
  with_hyper.mutable_hyper()->add_groups()->set_lr(1e-3);
  cases.push_back({"hyper-parameters", with_hyper, StatusCode::kInvalidArgument,
                   "carries no gradient and no hyper-parameters"});
  cases.push_back({"a step ahead", Withdrawal(kB, 1), StatusCode::kFailedPrecondition,
                   "step 1 is ahead of the shard (version 0)"});
  cases.push_back({"a worker that pushed", Withdrawal(kA, 0), StatusCode::kFailedPrecondition,
                   "worker 1 pushed step 0 to shard 0: a push is not withdrawn"});
  cases.push_back({"a worker that is not a participant", Withdrawal(99, 0),
                   StatusCode::kFailedPrecondition,
                   "worker 99 is not a participant of step 0: it has nothing to withdraw"});
  v1::PushRequest other_shard = Withdrawal(kB, 0);
  other_shard.set_shard_id(5);
  cases.push_back(
      {"another shard", other_shard, StatusCode::kNotFound, "shard 5 is not served here"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    v1::PushResponse resp;
    const Status s = Withdraw(c.req, &resp);
    EXPECT_EQ(s.code(), c.code) << s.ToString();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.ToString();
    EXPECT_TRUE(Unchanged(held, Capture(shard_)));
  }
  // Still waiting for B and C: the refusals withdrew nobody.
  ASSERT_TRUE(Push(kB, 0, RandomVector(kLength, 42)).ok());
  EXPECT_EQ(shard_.Snapshot().version(), 0u);
}

TEST_F(WithdrawTest, APushAfterAWithdrawalIsTakenAndWithdrawalsAloneCompleteNothing) {
  // Everybody withdraws: with no payload there is no step to apply.
  for (uint64_t w : {kA, kB, kC}) ASSERT_TRUE(Withdraw(w, 0).ok());
  const CapturedShard held = Capture(shard_);
  EXPECT_EQ(held.version, 0u);
  // A push of the open step takes its worker's withdrawal back; the others
  // stay withdrawn, so the step completes with that push alone.
  const auto gb = RandomVector(kLength, 50);
  ASSERT_TRUE(Push(kB, 0, gb).ok());
  const ShardStore store = shard_.Snapshot();
  ASSERT_EQ(store.version(), 1u);
  ReferenceAdamW reference(init_, FixtureMachineOptions().hyper);
  reference.Step(std::vector<double>(gb.begin(), gb.end()));
  EXPECT_TRUE(AllNear(store.params(), reference.params(), 1e-5));
}

TEST_F(WithdrawTest, TheNextStepWaitsForAWorkerThatWithdrewFromTheLastOne) {
  ASSERT_TRUE(Push(kA, 0, RandomVector(kLength, 60)).ok());
  ASSERT_TRUE(Push(kC, 0, RandomVector(kLength, 61)).ok());
  ASSERT_TRUE(Withdraw(kB, 0).ok());
  ASSERT_EQ(shard_.Snapshot().version(), 1u);
  ASSERT_TRUE(Push(kA, 1, RandomVector(kLength, 62)).ok());
  ASSERT_TRUE(Push(kC, 1, RandomVector(kLength, 63)).ok());
  EXPECT_EQ(shard_.Snapshot().version(), 1u) << "step 1 did not wait for B";
  ASSERT_TRUE(Push(kB, 1, RandomVector(kLength, 64)).ok());
  EXPECT_EQ(shard_.Snapshot().version(), 2u);
}

}  // namespace
}  // namespace loco::test

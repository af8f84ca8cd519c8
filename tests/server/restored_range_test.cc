// A shard restored from a checkpoint serves only once the coordinator's
// layout agrees with the checkpoint's range and model size: ShardMachine
// driven directly, the coordinator answered from plain data (FakeMembership).
#include <gtest/gtest.h>

#include <string>

#include "server/checkpoint.h"
#include "server/shard_machine.h"
#include "tests/common/says.h"
#include "tests/server/reference.h"
#include "tests/server/shard_machine_fixture.h"

namespace loco::test {
namespace {

constexpr uint64_t kRestoredLength = 1000;
constexpr uint64_t kRestoringWorker = 1;

ShardCheckpoint CheckpointOf(uint64_t total_elements) {
  ShardCheckpoint c;
  c.range = ShardRange{0, kRestoredLength};
  c.version = 5;
  c.total_elements = total_elements;
  c.params = RandomVector(kRestoredLength, 3);
  c.m.assign(kRestoredLength, 0.0f);
  c.v.assign(kRestoredLength, 0.0f);
  return c;
}

v1::PullRequest PullOfVersion5() {
  v1::PullRequest req;
  req.set_worker_id(kRestoringWorker);
  req.set_min_version(5);
  return req;
}

// The coordinator restarted too and knows no model size: a checkpoint that
// holds the model's size waits (Unavailable) for the coordinator to learn
// the layout from the servers' registrations, instead of serving unchecked;
// once the layout is there and agrees, it serves.
TEST(RestoredRange, WithTheModelSizeItWaitsForALayoutInsteadOfServingUnchecked) {
  FakeMembership knows_nothing({kRestoringWorker}, 0, kRestoredLength, 0);
  ShardMachine shard(FixtureMachineOptions(), &knows_nothing);
  ASSERT_TRUE(shard.RestoreFrom(CheckpointOf(kRestoredLength)).ok());
  const CapturedShard before = Capture(shard);
  v1::PullResponse resp;
  const Status waiting = shard.Pull(PullOfVersion5(), &resp);
  EXPECT_EQ(waiting.code(), StatusCode::kUnavailable) << waiting.ToString();
  EXPECT_TRUE(Says(waiting.message(),
                   {"restored from a checkpoint of a model of 1000 elements and waits"}));
  EXPECT_TRUE(shard.range_unconfirmed());
  EXPECT_TRUE(Unchanged(before, Capture(shard)));
  // What the shard reports when it registers: the model's size with its range.
  v1::RegisterServerRequest registration;
  shard.FillRegistration(&registration);
  EXPECT_EQ(registration.total_elements(), kRestoredLength);
  EXPECT_EQ(registration.length(), kRestoredLength);

  FakeMembership agrees({kRestoringWorker}, 0, kRestoredLength, kRestoredLength);
  ShardMachine confirmed(FixtureMachineOptions(), &agrees);
  ASSERT_TRUE(confirmed.RestoreFrom(CheckpointOf(kRestoredLength)).ok());
  const Status served = confirmed.Pull(PullOfVersion5(), &resp);
  EXPECT_TRUE(served.ok()) << served.ToString();
  EXPECT_EQ(resp.version(), 5u);
  EXPECT_FALSE(confirmed.range_unconfirmed());
}

// A checkpoint without the model's size (format 1) cannot be checked
// against a coordinator that knows none either: served, asked again later.
TEST(RestoredRange, WithoutTheModelSizeACoordinatorThatKnowsNoneCannotTell) {
  FakeMembership knows_nothing({kRestoringWorker}, 0, kRestoredLength, 0);
  ShardMachine shard(FixtureMachineOptions(), &knows_nothing);
  ASSERT_TRUE(shard.RestoreFrom(CheckpointOf(0)).ok());
  v1::PullResponse resp;
  const Status served = shard.Pull(PullOfVersion5(), &resp);
  EXPECT_TRUE(served.ok()) << served.ToString();
  EXPECT_TRUE(shard.range_unconfirmed()) << "asked again next time";
}

// The same range of another model (a checkpoint of another run whose first
// shard happens to be as long) is refused, and the refusal is kept.
TEST(RestoredRange, TheSameRangeOfAnotherModelIsRefusedAndChangesNothing) {
  FakeMembership other_model({kRestoringWorker}, 0, kRestoredLength, 2 * kRestoredLength);
  ShardMachine shard(FixtureMachineOptions(), &other_model);
  ASSERT_TRUE(shard.RestoreFrom(CheckpointOf(kRestoredLength)).ok());
  const CapturedShard before = Capture(shard);
  v1::PullResponse resp;
  for (int i = 0; i < 2; ++i) {
    const Status refused = shard.Pull(PullOfVersion5(), &resp);
    EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.ToString();
    EXPECT_TRUE(Says(refused.message(),
                     {"restored from a checkpoint of [0, 1000) of a model of 1000 elements, but "
                      "the coordinator's layout of 2000 elements gives shard 0 [0, 1000): the "
                      "checkpoint is another model's"}));
  }
  EXPECT_FALSE(shard.range_unconfirmed()) << "refused, not waiting";
  EXPECT_TRUE(Unchanged(before, Capture(shard)));
}

}  // namespace
}  // namespace loco::test

// UplinkTurns: one shard's push at a time, the last shard first, and no
// shard held up by a later one that is done, failed or stalled.
#include "client/uplink_turns.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace loco {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST(UplinkTurnsTest, TheLastShardGoesFirstAndEachWaitsForEveryLaterOne) {
  UplinkTurns turns(3);
  EXPECT_TRUE(turns.Ready(2));
  EXPECT_FALSE(turns.Ready(1));
  EXPECT_FALSE(turns.Ready(0));
  turns.Done(2);
  EXPECT_TRUE(turns.Ready(1));
  EXPECT_FALSE(turns.Ready(0));
  turns.Done(2);  // idempotent
  EXPECT_FALSE(turns.Ready(0));
  turns.Done(1);
  EXPECT_TRUE(turns.Ready(0));
}

TEST(UplinkTurnsTest, AnEarlierShardDoneOutOfTurnDoesNotOpenTheTurnOfOneBetween) {
  // Shard 0 failed before its turn (Done on its way out): shard 1 still
  // waits for shard 2.
  UplinkTurns turns(3);
  turns.Done(0);
  EXPECT_FALSE(turns.Ready(1));
  turns.Done(2);
  EXPECT_TRUE(turns.Ready(1));
}

TEST(UplinkTurnsTest, WaitersGoInOrderAcrossThreads) {
  constexpr size_t kShards = 4;
  UplinkTurns turns(kShards);
  std::atomic<int> next{0};
  std::vector<int> position(kShards, -1);
  std::vector<std::thread> threads;
  // Started in the wrong order on purpose: the first to start waits longest.
  for (size_t i = 0; i < kShards; ++i) {
    threads.emplace_back([&, i] {
      UplinkTurn turn(&turns, i);
      ASSERT_TRUE(turn.Wait(Clock::now() + std::chrono::seconds(10)));
      position[i] = next++;
      std::this_thread::sleep_for(milliseconds(2));
      // Done on destruction.
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < kShards; ++i) {
    EXPECT_EQ(position[i], static_cast<int>(kShards - 1 - i)) << "shard " << i;
  }
}

TEST(UplinkTurnsTest, AStalledLaterShardHoldsUpAnEarlierOneOnlyUntilTheLimit) {
  UplinkTurns turns(2);
  const auto start = Clock::now();
  EXPECT_FALSE(turns.Wait(0, start + milliseconds(30)));
  EXPECT_GE(Clock::now() - start, milliseconds(30));
  // A waiter is woken by Done, not by its limit.
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(20));
    turns.Done(1);
  });
  const auto waited_from = Clock::now();
  EXPECT_TRUE(turns.Wait(0, waited_from + std::chrono::seconds(10)));
  EXPECT_LT(Clock::now() - waited_from, std::chrono::seconds(5));
  later.join();
}

TEST(UplinkTurnsTest, WithoutTurnsEveryShardIsReady) {
  UplinkTurn turn(nullptr, 0);
  EXPECT_TRUE(turn.Ready());
  EXPECT_TRUE(turn.Wait(Clock::now()));
  turn.Done();
}

}  // namespace
}  // namespace loco

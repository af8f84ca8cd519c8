// GradientProgress: waiters wake when the final part reaches below what they
// wait for, or when the computation returns; the final part never shrinks;
// a failed computation wakes every waiter with nothing.
#include "client/gradient_progress.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <chrono>
#include <thread>
#include <vector>

namespace loco {
namespace {

TEST(GradientProgressTest, WaitersWakeAsTheFinalPartGrowsAndAtTheEnd) {
  GradientProgress progress(1000);
  std::atomic<int> woke{0};
  std::optional<size_t> seen_mid, seen_all;
  std::thread mid([&] {
    seen_mid = progress.WaitFinalBelow(600);
    ++woke;
  });
  std::thread all([&] {
    seen_all = progress.WaitFinalBelow(1);
    ++woke;
  });
  progress.Ready(800);  // not below 600: nobody wakes
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(woke.load(), 0);
  progress.Ready(500);
  mid.join();
  EXPECT_EQ(seen_mid, std::optional<size_t>(500));
  progress.Ready(900);  // ignored: the final part never shrinks
  EXPECT_EQ(progress.WaitFinalBelow(600), std::optional<size_t>(500));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(woke.load(), 1);
  progress.Done(true);
  all.join();
  EXPECT_EQ(seen_all, std::optional<size_t>(0));
  progress.WaitDone();  // returns at once
}

TEST(GradientProgressTest, AFailedComputationWakesEveryWaiterWithNothing) {
  GradientProgress progress(100);
  progress.Ready(40);
  std::vector<std::optional<size_t>> seen(3, std::optional<size_t>(7));
  std::vector<std::thread> waiters;
  for (size_t i = 0; i < seen.size(); ++i) {
    waiters.emplace_back([&, i] { seen[i] = progress.WaitFinalBelow(10 * i + 1); });
  }
  std::thread done_waiter([&] { progress.WaitDone(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  progress.Done(false);
  for (auto& t : waiters) t.join();
  done_waiter.join();
  for (const auto& s : seen) EXPECT_FALSE(s.has_value());
  EXPECT_FALSE(progress.WaitFinalBelow(100).has_value());
}

}  // namespace
}  // namespace loco

#include <gtest/gtest.h>

#include "server/coordinator/join_rate_limit.h"

namespace loco {
namespace {

TEST(JoinRateLimit, ABurstThenTheRateAndRefundsGiveBack) {
  std::chrono::steady_clock::time_point now{};
  JoinRateLimit limit(/*joins_per_second=*/2, /*burst=*/3, [&] { return now; });
  EXPECT_TRUE(limit.TryAcquire());
  EXPECT_TRUE(limit.TryAcquire());
  EXPECT_TRUE(limit.TryAcquire());
  EXPECT_FALSE(limit.TryAcquire()) << "the burst is spent";
  now += std::chrono::milliseconds(400);  // 0.8 of a join
  EXPECT_FALSE(limit.TryAcquire());
  now += std::chrono::milliseconds(100);  // 1.0
  EXPECT_TRUE(limit.TryAcquire());
  EXPECT_FALSE(limit.TryAcquire());
  limit.Refund();
  EXPECT_TRUE(limit.TryAcquire()) << "a refunded join is available again";
  now += std::chrono::hours(1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limit.TryAcquire());
  EXPECT_FALSE(limit.TryAcquire()) << "refill stops at the burst";
}

}  // namespace
}  // namespace loco

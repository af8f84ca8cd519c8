// RetryPolicy without a server: the attempts are lambdas returning the
// statuses a channel would. Bounded by count, by backoff budget, or (Join's
// coordinator outage) by the budget alone.
#include "client/retry_policy.h"

#include <gtest/gtest.h>

#include <chrono>

namespace loco {
namespace {

const grpc::Status kUnavailable(grpc::StatusCode::UNAVAILABLE, "connection refused");

RetryOptions Fast(int max_retries, int budget_ms) {
  return RetryOptions{max_retries, /*initial_backoff_ms=*/1, /*max_backoff_ms=*/2, budget_ms};
}

TEST(RetryPolicy, RetriesUnavailableUntilTheCallAnswers) {
  RetryPolicy policy(Fast(8, 30000), 1);
  int attempts = 0;
  grpc::Status s =
      policy.Run("Test", [&] { return ++attempts < 4 ? kUnavailable : grpc::Status::OK; });
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(attempts, 4);
}

// What Run returns, and after how many attempts, when every attempt
// answers `answer`.
struct Outcome {
  grpc::Status status;
  int attempts = 0;
};
Outcome RunAnswering(const RetryOptions& options, const grpc::Status& answer) {
  RetryPolicy policy(options, 1);
  Outcome out;
  out.status = policy.Run("Test", [&] {
    ++out.attempts;
    return answer;
  });
  return out;
}

TEST(RetryPolicy, AnyOtherErrorEndsTheCallAtOnce) {
  const Outcome o =
      RunAnswering(Fast(8, 30000), grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "slow"));
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(o.attempts, 1);
}

TEST(RetryPolicy, GivesUpAfterMaxRetries) {
  const Outcome o = RunAnswering(Fast(2, 30000), kUnavailable);
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(o.attempts, 3);  // the call and two retries
}

// max_retries < 0 (Join while the coordinator is unreachable): no count
// limit, only the backoff budget; 40 ms of backoff at 0-2 ms per retry is
// at least 20 retries, far past the default count of 8.
TEST(RetryPolicy, WithoutACountLimitTheBudgetAloneEndsIt) {
  const auto start = std::chrono::steady_clock::now();
  const Outcome o = RunAnswering(Fast(-1, 40), kUnavailable);
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_GT(o.attempts, 20);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(RetryPolicy, BackoffIsJitteredUnderTheDoublingCap) {
  RetryPolicy policy(RetryOptions{8, 50, 2000, 30000}, 7);
  for (int retry = 0; retry < 12; ++retry) {
    const int64_t cap = std::min<int64_t>(2000, int64_t{50} << retry);
    for (int i = 0; i < 20; ++i) {
      const int64_t wait = policy.Backoff(retry).count();
      EXPECT_GE(wait, 0);
      EXPECT_LE(wait, cap) << "retry " << retry;
    }
  }
}

}  // namespace
}  // namespace loco

// RetryPolicy: retries a gRPC call refused with UNAVAILABLE (server not up
// yet, restarting, connection reset) with exponential backoff and full
// jitter, bounded in count and in total sleep time. RetryLogPacer: which of
// those retries get a log line.
//
// Thread-safe: several shard threads may call Run concurrently (the jitter
// generator is guarded by a mutex; each Run paces its own log lines).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <string>

#include <grpcpp/grpcpp.h>

namespace loco {

struct RetryOptions {
  int max_retries = 8;  // < 0: no count limit, only retry_budget_ms
  int initial_backoff_ms = 50;
  int max_backoff_ms = 2000;
  int retry_budget_ms = 30000;  // total sleep allowed for one Run
};

// The first kEveryRetryLogged retries of a call are logged each; after that
// at most one line per kQuietPeriod, so that a long outage (Join waits up to
// coordinator_outage_ms for a restarted coordinator) reads as a line every
// few seconds, not one per backoff. Not thread-safe: one per Run.
class RetryLogPacer {
 public:
  static constexpr int kEveryRetryLogged = 3;
  static constexpr std::chrono::seconds kQuietPeriod{10};

  // Whether retry number `retry` (1-based), due at `now`, gets a line.
  bool ShouldLog(int retry, std::chrono::steady_clock::time_point now);
  // After ShouldLog said yes: how many retries went without a line between
  // the previous line and this one (for this line to report).
  int unlogged() const { return unlogged_; }

 private:
  std::chrono::steady_clock::time_point last_logged_{};
  int unlogged_ = 0;
  int pending_ = 0;
};

class RetryPolicy {
 public:
  RetryPolicy(RetryOptions options, uint64_t jitter_seed)
      : options_(options), rng_(jitter_seed) {}

  // Calls `attempt` (which must build a fresh grpc::ClientContext each time)
  // until it returns something other than UNAVAILABLE, the retry count or
  // the budget runs out. Returns the last status. `what` names the call in
  // the log lines written before the retries (paced by RetryLogPacer).
  grpc::Status Run(const std::string& what, const std::function<grpc::Status()>& attempt);

  // The sleep before retry number `retry` (0-based): uniform in
  // [0, min(max_backoff, initial · 2^retry)] milliseconds.
  std::chrono::milliseconds Backoff(int retry);

 private:
  RetryOptions options_;
  std::mutex mu_;
  std::mt19937_64 rng_;
};

}  // namespace loco

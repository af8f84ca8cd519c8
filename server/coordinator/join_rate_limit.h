// JoinRateLimit: a token bucket in front of Join, so that a holder of the
// worker credential cannot churn the membership (every join moves the epoch
// and every shard's step participants) faster than `joins_per_second`.
//
// The bucket holds at most `burst` joins and starts full, so a whole
// cluster (up to --max-workers) can start at once; it refills at
// `joins_per_second`. Only admissions spend it: a join refused for another
// reason gives its token back (Refund), so a flood past --max-workers is
// refused for that, not for the rate. A refused join changes nothing but is
// counted by the caller.
//
// Not thread-safe: the owner (CoordinatorService) serialises calls. The
// clock is injectable so tests drive the refill without sleeping.
#pragma once

#include <chrono>
#include <functional>

namespace loco {

class JoinRateLimit {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // `joins_per_second` > 0 and `burst` >= 1; `clock` defaults to
  // steady_clock::now.
  JoinRateLimit(double joins_per_second, double burst, Clock clock = nullptr);

  // Takes one join from the bucket; false (and nothing taken) when empty.
  bool TryAcquire();
  // Gives back the join TryAcquire took (the join was refused after all).
  void Refund();

 private:
  void Refill();

  double rate_;
  double burst_;
  Clock clock_;
  double available_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace loco

// LocalGroupBarrier: a reusable barrier for the threads of a local group,
// with a timeout and an abort, so that no rank waits forever for a rank that
// never arrives.
//
// Contract: Arrive blocks until `parties` threads have arrived in the same
// phase (OK), until the timeout (DeadlineExceeded) or until Abort (the abort
// status). A timeout breaks the barrier for good: the ranks of a broken
// group disagree on how far they got, so every waiting and every later
// Arrive fails with the same status at once. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "common/status.h"

namespace loco {

class LocalGroupBarrier {
 public:
  LocalGroupBarrier(int parties, std::chrono::milliseconds timeout)
      : parties_(parties), timeout_(timeout) {}

  // `what` names the collective in the timeout message.
  Status Arrive(const char* what);
  // Breaks the barrier with `why` (the first reason wins).
  void Abort(const Status& why);

 private:
  const int parties_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;      // guarded by mu_
  uint64_t phase_ = 0;   // guarded by mu_; advances when all arrived
  Status broken_;        // guarded by mu_; not OK once broken
};

}  // namespace loco

#include "worker/group/local_group_barrier.h"

#include <string>

namespace loco {

Status LocalGroupBarrier::Arrive(const char* what) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!broken_.ok()) return broken_;
  const uint64_t phase = phase_;
  if (++arrived_ == parties_) {
    arrived_ = 0;
    ++phase_;
    cv_.notify_all();
    return Status::Ok();
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  const bool done = cv_.wait_until(lock, deadline,
                                   [&] { return phase_ != phase || !broken_.ok(); });
  if (phase_ != phase) return Status::Ok();
  if (!done) {
    broken_ = DeadlineExceeded(std::string("local group: ") + what + ": " +
                               std::to_string(parties_ - arrived_) + " of " +
                               std::to_string(parties_) + " local rank(s) did not arrive within " +
                               std::to_string(timeout_.count()) + " ms");
    cv_.notify_all();
  }
  return broken_;
}

void LocalGroupBarrier::Abort(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.ok()) return;
  broken_ = why.ok() ? Aborted("local group aborted") : why;
  cv_.notify_all();
}

}  // namespace loco

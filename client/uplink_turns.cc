#include "client/uplink_turns.h"

namespace loco {

bool UplinkTurns::ReadyLocked(size_t shard) const {
  for (size_t later = shard + 1; later < done_.size(); ++later) {
    if (!done_[later]) return false;
  }
  return true;
}

bool UplinkTurns::Ready(size_t shard) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ReadyLocked(shard);
}

bool UplinkTurns::Wait(size_t shard, std::chrono::steady_clock::time_point until) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, until, [&] { return ReadyLocked(shard); });
}

void UplinkTurns::Done(size_t shard) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shard >= done_.size() || done_[shard]) return;
    done_[shard] = true;
  }
  cv_.notify_all();
}

}  // namespace loco

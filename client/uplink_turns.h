// UplinkTurns: the order in which one step's pushes take the worker's
// uplink: one shard at a time, the last shard first.
//
// Why: the backward pass makes the gradient final from the end of the flat
// vector, so the last shard is final first. Sent together, the shards'
// pushes share the link and all arrive near the end of the upload: every
// server begins its step then, and every answer comes down after it. Sent
// one at a time, the last shard's push arrives after its own share of the
// upload; its server steps and its answer comes down the other direction of
// the link while the earlier shards are still going up. The bytes sent are
// the same.
//
// A shard's turn comes once every later shard is done (Done, idempotent,
// called as soon as its push is written or has failed; UplinkTurn calls it
// at the latest when it is destroyed). Thread-safe: one thread per shard.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

namespace loco {

class UplinkTurns {
 public:
  explicit UplinkTurns(size_t shards) : done_(shards, false) {}

  // True once every shard after `shard` is done.
  bool Ready(size_t shard) const;
  // Blocks until Ready(shard) or `until`; returns Ready(shard).
  bool Wait(size_t shard, std::chrono::steady_clock::time_point until) const;
  // `shard` has written its push, or will not: the shard before it may go.
  void Done(size_t shard);

 private:
  bool ReadyLocked(size_t shard) const;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<bool> done_;  // guarded by mu_
};

// One shard's place in the order, held by the thread that pushes it. A null
// `turns` is no order: always ready. Done on destruction.
class UplinkTurn {
 public:
  UplinkTurn(UplinkTurns* turns, size_t shard) : turns_(turns), shard_(shard) {}
  ~UplinkTurn() { Done(); }
  UplinkTurn(const UplinkTurn&) = delete;
  UplinkTurn& operator=(const UplinkTurn&) = delete;

  bool Ready() const { return turns_ == nullptr || turns_->Ready(shard_); }
  bool Wait(std::chrono::steady_clock::time_point until) const {
    return turns_ == nullptr || turns_->Wait(shard_, until);
  }
  void Done() {
    if (turns_ != nullptr) turns_->Done(shard_);
  }

 private:
  UplinkTurns* const turns_;
  const size_t shard_;
};

}  // namespace loco

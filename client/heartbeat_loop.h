// HeartbeatLoop: a background thread that sends Heartbeat(worker_id, step,
// ticket) to
// the coordinator every interval, reports rank/world changes and stops (after
// calling on_expired once) when the coordinator answers NOT_FOUND, i.e. this
// worker is unknown or expired and must join again.
//
// Answers of an older coordinator incarnation than one that answered
// before are ignored (BeatOnce returns UNAVAILABLE naming both), a
// NOT_FOUND included when it carries its incarnation
// (rpc/incarnation_trailer.h): a stale coordinator process never expires
// the worker.
//
// Other errors (coordinator briefly unreachable) are logged and the loop
// carries on: the coordinator's timeout, not the worker, decides expiry.
// Callbacks run on the heartbeat thread (or BeatOnce's caller) and must be
// thread-safe; on_expired runs at most once.
// Stop() is idempotent and returns within about one RPC deadline.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "proto/loco.grpc.pb.h"

namespace loco {

struct HeartbeatCallbacks {
  std::function<uint64_t()> current_step;
  std::function<void(const v1::HeartbeatResponse&)> on_update;
  std::function<void()> on_expired;
  // Optional: true once the worker has left on its own (Worker::LeaveNow,
  // from any thread). The loop then ends before its next heartbeat, and a
  // NOT_FOUND (the coordinator has let the worker go) is no expiry:
  // on_expired is not called and nothing is logged.
  std::function<bool()> has_left;
};

class HeartbeatLoop {
 public:
  // `stub` must outlive the loop.
  // `ticket` is the JoinResponse's (empty when the coordinator gave none).
  HeartbeatLoop(v1::Coordinator::Stub* stub, uint64_t worker_id, std::string ticket,
                int interval_ms, int rpc_timeout_ms, HeartbeatCallbacks callbacks);
  ~HeartbeatLoop();
  HeartbeatLoop(const HeartbeatLoop&) = delete;
  HeartbeatLoop& operator=(const HeartbeatLoop&) = delete;

  void Start();
  void Stop();

  // One heartbeat now, on the calling thread (any thread; bounded by the
  // RPC deadline), as the loop sends them: the training thread asks with it
  // whether the worker is still a member after a step failed, since a
  // stalled process may see its step fail before this loop has run
  // again. NOT_FOUND calls on_expired (once) and stops the loop.
  grpc::Status BeatOnce();

 private:
  void Run();
  void OnExpired(const grpc::Status& why);

  v1::Coordinator::Stub* stub_;
  uint64_t worker_id_;
  std::string ticket_;
  int interval_ms_;
  int rpc_timeout_ms_;
  HeartbeatCallbacks callbacks_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> expired_{false};
  std::atomic<uint64_t> newest_incarnation_{0};  // of the coordinator's answers
  std::thread thread_;
};

}  // namespace loco

// TerminationWatch: turns SIGINT/SIGTERM into a callback on a thread of its
// own, so that a worker can leave the cluster at once when it is told to stop
// (Kubernetes sends SIGTERM) instead of being expired heartbeats later.
//
// Install() (first thing in main) blocks the signals in the calling thread,
// so that threads created later inherit the mask and a signal stays pending
// for the watch thread's sigtimedwait. Threads that libraries started before
// main (OpenBLAS's pool) do not block them, so Install() also sets a handler
// that only writes the signal number to a pipe the watch thread reads: the
// one piece of process-wide state, as signal dispositions are process-wide.
//
// Thread-safe: Start/Stop from the owning thread; the callback runs on the
// watch thread, at most once.
#pragma once

#include <atomic>
#include <functional>
#include <thread>

#include "common/status.h"

namespace loco {

class TerminationWatch {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread and installs the
  // pipe-writing handler. Call once, from main.
  static Status Install();

  TerminationWatch() = default;
  ~TerminationWatch();  // Stop()
  TerminationWatch(const TerminationWatch&) = delete;
  TerminationWatch& operator=(const TerminationWatch&) = delete;

  // Starts the watch thread; `on_signal(signo)` runs on it when SIGINT or
  // SIGTERM arrives.
  void Start(std::function<void(int)> on_signal);
  // Ends the watch thread (within about 100 ms). Idempotent.
  void Stop();

 private:
  void Run();

  std::function<void(int)> on_signal_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace loco

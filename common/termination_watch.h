// TerminationWatch: SIGINT/SIGTERM for every binary, without work in an
// asynchronous signal handler.
//
// Install() (first thing in main) blocks the signals in the calling thread,
// so that threads created later inherit the mask and a signal stays pending
// for sigtimedwait. Threads that libraries started before main (OpenBLAS's
// pool) do not block them, so Install() also sets a handler that only writes
// the signal number to a pipe the waiter reads: the one piece of
// process-wide state, as signal dispositions are process-wide.
//
// Two ways to wait: Wait() on the calling thread (the servers' main loop),
// or Start() a watch thread that runs a callback (the worker, whose main
// thread trains).
//
// Thread-safe: Start/Stop from the owning thread; the callback runs on the
// watch thread, at most once.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "common/status.h"

namespace loco {

class TerminationWatch {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread and installs the
  // pipe-writing handler. Call once, from main, before any thread starts.
  static Status Install();

  // Returns the signal number once SIGINT or SIGTERM arrives, or 0 as soon
  // as `should_stop()` returns true (checked every `poll`; may be empty).
  // Precondition: Install() succeeded.
  static int Wait(const std::function<bool()>& should_stop,
                  std::chrono::milliseconds poll = std::chrono::milliseconds(200));

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

// Ctrl-C for calls that wait in C++: Python runs its signal handlers only
// on the main thread and only when asked, so a call that waits with the
// GIL released looks for them itself, every kSignalCheckPeriod.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>

#include "common/status.h"

namespace loco::python {

inline constexpr std::chrono::milliseconds kSignalCheckPeriod{100};

// Takes the GIL and runs Python's pending signal handlers (on the main
// thread; elsewhere it finds nothing). True when one raised: its exception
// (KeyboardInterrupt for Ctrl-C) is set on this thread. Call without the
// GIL. Once the interpreter finalizes, a daemon thread that calls it never
// returns (python/src/gil.h): the waits below stay as they are, and so
// does what their call uses, until the process exits.
bool PythonSignalRaised();

// Waits until `finished(kSignalCheckPeriod)` (which waits up to that long)
// returns true, running the signal handlers between the slices; when one
// raises, calls `on_raise` once and returns true at once (the caller then
// waits for what it interrupted, and throws py::error_already_set). Call
// without the GIL.
bool WaitWatchingSignals(const std::function<bool(std::chrono::milliseconds)>& finished,
                         const std::function<void()>& on_raise);

// What CallWatchingSignals saw: the call's status, and whether a signal
// handler raised meanwhile (its exception is then set on this thread).
struct WatchedCall {
  Status status;
  bool raised = false;
};

// Runs `call` on a thread of its own while this thread, the GIL released,
// looks for Ctrl-C (WaitWatchingSignals), and returns once `call` has. When
// a handler raised, `on_raise` is called then and again every
// kSignalCheckPeriod until `call` returns: a wait that `call` starts after
// the first (a Join inside Rejoin clears InterruptJoin) ends too. Call with
// the GIL; throw py::error_already_set when `raised`. `park_when_done`,
// when set and true once `call` has returned, means the process is exiting
// (WorkerHandle::CloseAtExit): this thread, a daemon one, then parks
// (ParkUntilExit) instead of taking the GIL back.
WatchedCall CallWatchingSignals(const std::function<Status()>& call,
                                const std::function<void()>& on_raise,
                                const std::atomic<bool>* park_when_done = nullptr);

}  // namespace loco::python

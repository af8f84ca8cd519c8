// Waiting for SIGINT/SIGTERM without async signal handlers: the signals are
// blocked in every thread and collected synchronously with sigtimedwait.
#pragma once

#include <chrono>
#include <functional>

#include "common/status.h"

namespace loco {

// Blocks SIGINT and SIGTERM in the calling thread; threads created afterwards
// inherit the mask. Call at the top of main, before any thread starts.
Status BlockTerminationSignals();

// Returns the signal number once SIGINT or SIGTERM is pending, or 0 as soon
// as `should_stop()` returns true (checked every `poll`).
int WaitForTermination(const std::function<bool()>& should_stop,
                       std::chrono::milliseconds poll = std::chrono::milliseconds(200));

}  // namespace loco

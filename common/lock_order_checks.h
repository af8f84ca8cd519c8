// DisableLockOrderChecks: turns off Abseil's lock-order (deadlock) checking
// for this process.
//
// Debian builds Abseil without NDEBUG, which leaves absl::Mutex's debug
// check on: every lock of an absl::Mutex (gRPC takes them on every call,
// read and write) records the lock order in a process-wide graph, and a
// cycle in that graph aborts the process, even when no thread ever waits
// on it. The check costs ~3.5x per lock (about 135 against 40 ns per pair
// of locks on the development machine) and a false alarm would kill a
// server in the middle of training. Our own code locks std::mutex, so the
// check guards only gRPC's internals; the service binaries turn it off
// first thing in main. Tests keep Abseil's default.
//
// Call before any thread takes an absl::Mutex (the mode is read without
// synchronisation). Idempotent.
#pragma once

namespace loco {

void DisableLockOrderChecks();

}  // namespace loco

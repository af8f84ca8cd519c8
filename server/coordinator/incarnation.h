// Incarnation: which start of the coordinator this is (ClusterView.
// incarnation). It only grows across restarts, so that servers and workers
// can tell a restarted coordinator's answers from a stale one's, and worker
// ids (incarnation * Membership::kIdsPerIncarnation + n) never repeat.
//
// With a state directory the number is persisted there (the file
// "incarnation", replaced atomically) and each start takes the larger of
// the stored one + 1 and the clock's; without one it is derived from the
// wall clock alone: tenths of a second since 2026-01-01 UTC, which grows
// across restarts as long as the clock does not step back (a restart takes
// far longer than a tenth of a second).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace loco {

// The clock's incarnation at `now` (>= 1).
uint64_t ClockIncarnation(std::chrono::system_clock::time_point now);

// The next incarnation: persisted in `state_dir` when it is not empty (the
// directory must exist and be writable; a stored number that does not
// parse is an error, not a reset).
[[nodiscard]] StatusOr<uint64_t> NextIncarnation(const std::string& state_dir,
                                                 std::chrono::system_clock::time_point now);

}  // namespace loco

// --shutdown-timeout-ms, as every server binary declares it: on SIGTERM or
// SIGINT (common/termination_watch.h) how long in-flight calls may finish
// before they are cancelled.
#pragma once

#include <cstdint>

#include "common/flags.h"

namespace loco {

// Registers --shutdown-timeout-ms / $LOCO_SHUTDOWN_TIMEOUT_MS (default 2000,
// in [0, 600000]) and binds it to `*milliseconds`.
void AddShutdownTimeoutFlag(FlagSet& flags, int64_t* milliseconds);

}  // namespace loco

#include "common/shutdown_timeout_flag.h"

namespace loco {

void AddShutdownTimeoutFlag(FlagSet& flags, int64_t* milliseconds) {
  flags.AddInt("shutdown-timeout-ms", "LOCO_SHUTDOWN_TIMEOUT_MS", 2000, 0, 600000,
               "on SIGTERM, how long in-flight calls may finish", milliseconds);
}

}  // namespace loco

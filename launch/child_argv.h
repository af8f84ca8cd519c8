// The command lines loco-launch starts its children with: the settings of
// LaunchOptions as each binary's flags, then the user's extra flags (which
// may override them). Numbers are written so that the child parses back
// exactly the value given (common/format_double.h).
//
// What the launcher adds at start time is not here: a worker's --name and
// its --wait-for-workers or --join-at-step, and --metrics-port with a local
// Prometheus.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launch/launch_options.h"

namespace loco {

// loco-coordinator, on any free port.
std::vector<std::string> CoordinatorArgv(const LaunchOptions& options);
// loco-server for shard `shard`, on any free port, registering with the
// coordinator at `coordinator` (host:port).
std::vector<std::string> ServerArgv(const LaunchOptions& options, int shard,
                                    const std::string& coordinator);
// loco-worker, training until `total_steps`.
std::vector<std::string> WorkerArgv(const LaunchOptions& options, const std::string& coordinator,
                                    uint64_t total_steps);

}  // namespace loco

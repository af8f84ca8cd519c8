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
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "launch/launch_options.h"

namespace loco {

// The push codecs of loco-worker's --codec, in the order --help lists them
// (launch may not include client/, which defines them).
std::vector<std::string> PushCodecNames();
// Whether `codec` is a block codec: codes of --bits bits in blocks of
// --block-size, which WorkerArgv passes on only then (loco-worker refuses
// them typed beside fp32 or bf16, which send full-precision values).
bool QuantizesToBits(const std::string& codec);

// loco-coordinator, on any free port.
std::vector<std::string> CoordinatorArgv(const LaunchOptions& options);
// loco-server for shard `shard`, on any free port, registering with the
// coordinator at `coordinator` (host:port).
std::vector<std::string> ServerArgv(const LaunchOptions& options, int shard,
                                    const std::string& coordinator);
// loco-worker, training until `total_steps`; --bits and --block-size with a
// block codec only.
std::vector<std::string> WorkerArgv(const LaunchOptions& options, const std::string& coordinator,
                                    uint64_t total_steps);

// Every child inherits loco-launch's environment, and the argv above sets
// the per-process settings it knows (--port, --shard-id, a worker's
// --name), but not these, which must differ between processes:
// LOCO_HEALTH_PORT, LOCO_METRICS_PORT (each child would bind the same
// port) and LOCO_ADVERTISE_ADDRESS (every server would advertise one
// address). InvalidArgument naming the variable, its value and what to do
// when `lookup` (getenv) finds one set (a port other than 0, an address).
[[nodiscard]] Status CheckSharedEnvironment(const std::function<const char*(const char*)>& lookup);

}  // namespace loco

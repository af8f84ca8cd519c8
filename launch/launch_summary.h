// LaunchSummary: the final figures of a loco-launch run and what it lost,
// as the text it ends with and as the JSON of --summary-json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "launch/launch_options.h"

namespace loco {

struct LaunchSummary {
  double test_accuracy = -1;  // -1 when no worker reported one
  uint64_t steps = 0;
  double wall_s = 0;
  double push_wire_bytes = 0, push_fp32_bytes = 0;
  double pull_wire_bytes = 0, pull_fp32_bytes = 0;
  // Mean training loss over each worker's first and last 10 reported steps,
  // averaged over workers.
  double first_loss = 0;
  double final_loss = 0;
  // What the run lost, and the events in order ("worker-2 lost ...").
  int workers_lost = 0, workers_left = 0, workers_joined = 0, server_restarts = 0;
  uint64_t server_steps_lost = 0;  // steps between a crash and the checkpoint resumed from
  // kill-coordinator faults: restarts, and the time training stood still
  // over all of them (each from the kill until the step moved after the
  // restart; see launch/coordinator_outage.h).
  int coordinator_restarts = 0;
  double coordinator_pause_s = 0;
  std::vector<std::string> events;

  // One JSON object; `options` adds the run's shape (servers, workers, codec).
  std::string ToJson(const LaunchOptions& options) const;
  std::string ToText() const;
};

// Whether the JSON summary could be written to `path` at the end of a run:
// the path is not a folder, and it is a writable file or its folder exists
// and takes new files. Checked before anything starts (the run may take
// hours), without creating the file. InvalidArgument saying what is wrong.
[[nodiscard]] Status CheckSummaryJsonPath(const std::string& path);

// Writes ToJson(options) and a line break to `path`, replacing it;
// Unavailable with the system's reason when it cannot.
[[nodiscard]] Status WriteSummaryJson(const LaunchSummary& summary, const LaunchOptions& options,
                                      const std::string& path);

}  // namespace loco

// ProcessMemory: the calling process's resident memory, as Linux reports it
// in /proc/self/status (VmRSS now, VmHWM the peak since start).
//
// Every MetricsEndpoint appends it to each scrape as
//   process_resident_memory_bytes       (gauge; the Prometheus convention)
//   loco_process_peak_resident_memory_bytes (gauge)
// so that memory per server is on the dashboards next to the traffic, and a
// benchmark can read a process's memory at a moment of its choosing. In a
// test that runs several servers in one process they all report that one
// process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "common/status.h"

namespace loco {

struct ProcessMemory {
  uint64_t resident_bytes = 0;
  uint64_t peak_resident_bytes = 0;
};

// Parses the text of a /proc/<pid>/status file. InvalidArgument when a
// VmRSS or VmHWM line is missing or not "<number> kB".
[[nodiscard]] StatusOr<ProcessMemory> ParseProcStatus(const std::string& text);
// Reads /proc/self/status. Unavailable where it cannot be read.
[[nodiscard]] StatusOr<ProcessMemory> ReadProcessMemory();
// The two gauges above; empty when /proc/self/status cannot be read.
std::vector<prometheus::MetricFamily> ProcessMemoryFamilies();

}  // namespace loco

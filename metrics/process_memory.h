// ProcessMemory: the calling process's resident memory, as Linux reports it
// in /proc/self/status (VmRSS now, VmHWM the peak since start), and how
// much of the C allocator's memory is in use and how much it keeps free
// (glibc's mallinfo2), which tells live data from memory the allocator
// holds for reuse when the resident size is above what the data needs.
//
// Every MetricsEndpoint appends it to each scrape as
//   process_resident_memory_bytes       (gauge; the Prometheus convention)
//   loco_process_peak_resident_memory_bytes (gauge)
//   loco_process_heap_in_use_bytes      (gauge; glibc only)
//   loco_process_heap_free_bytes        (gauge; glibc only)
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

struct HeapUsage {
  uint64_t in_use_bytes = 0;  // allocated and not freed (small and mmapped chunks)
  uint64_t free_bytes = 0;    // freed, kept by the allocator in its arenas
};

// Parses the text of a /proc/<pid>/status file. InvalidArgument when a
// VmRSS or VmHWM line is missing or not "<number> kB".
[[nodiscard]] StatusOr<ProcessMemory> ParseProcStatus(const std::string& text);
// Reads /proc/self/status. Unavailable where it cannot be read.
[[nodiscard]] StatusOr<ProcessMemory> ReadProcessMemory();
// The allocator's view of the heap. Unimplemented where the C library is
// not glibc. Walks every arena under its lock: cheap (microseconds) for a
// process with few arenas, but not for a hot path.
[[nodiscard]] StatusOr<HeapUsage> ReadHeapUsage();
// The gauges above; the resident ones are left out when /proc/self/status
// cannot be read, the heap ones where ReadHeapUsage is unimplemented.
std::vector<prometheus::MetricFamily> ProcessMemoryFamilies();

}  // namespace loco

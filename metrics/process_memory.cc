#include "metrics/process_memory.h"

#include <fstream>
#include <sstream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace loco {
namespace {

// The value of "<key>:   <n> kB" in bytes.
StatusOr<uint64_t> KilobytesField(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, key.size() + 1, key + ":") != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    uint64_t kb = 0;
    std::string unit;
    if (!(fields >> kb >> unit) || unit != "kB") {
      return InvalidArgument("process status line '" + line + "' is not '" + key +
                             ": <number> kB'");
    }
    return kb * 1024;
  }
  return InvalidArgument("process status has no " + key + " line");
}

prometheus::MetricFamily Gauge(const std::string& name, const std::string& help, double value) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = prometheus::MetricType::Gauge;
  prometheus::ClientMetric metric;
  metric.gauge.value = value;
  family.metric.push_back(metric);
  return family;
}

}  // namespace

StatusOr<ProcessMemory> ParseProcStatus(const std::string& text) {
  StatusOr<uint64_t> resident = KilobytesField(text, "VmRSS");
  if (!resident.ok()) return resident.status();
  StatusOr<uint64_t> peak = KilobytesField(text, "VmHWM");
  if (!peak.ok()) return peak.status();
  return ProcessMemory{*resident, *peak};
}

StatusOr<ProcessMemory> ReadProcessMemory() {
  std::ifstream in("/proc/self/status");
  if (!in) return Unavailable("cannot read /proc/self/status");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseProcStatus(text.str());
}

StatusOr<HeapUsage> ReadHeapUsage() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 info = mallinfo2();
  return HeapUsage{info.uordblks + info.hblkhd, info.fordblks};
#else
  return Unimplemented("heap usage needs glibc 2.33 or later (mallinfo2)");
#endif
}

std::vector<prometheus::MetricFamily> ProcessMemoryFamilies() {
  std::vector<prometheus::MetricFamily> families;
  StatusOr<ProcessMemory> m = ReadProcessMemory();
  if (m.ok()) {
    families.push_back(Gauge("process_resident_memory_bytes",
                             "Resident memory of this process (VmRSS)",
                             static_cast<double>(m->resident_bytes)));
    families.push_back(Gauge("loco_process_peak_resident_memory_bytes",
                             "Peak resident memory of this process since it started (VmHWM)",
                             static_cast<double>(m->peak_resident_bytes)));
  }
  StatusOr<HeapUsage> heap = ReadHeapUsage();
  if (heap.ok()) {
    families.push_back(Gauge("loco_process_heap_in_use_bytes",
                             "Bytes the C allocator has handed out and not had back",
                             static_cast<double>(heap->in_use_bytes)));
    families.push_back(Gauge("loco_process_heap_free_bytes",
                             "Freed bytes the C allocator keeps in its arenas for reuse",
                             static_cast<double>(heap->free_bytes)));
  }
  return families;
}

}  // namespace loco

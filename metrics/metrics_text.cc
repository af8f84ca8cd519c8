#include "metrics/metrics_text.h"

#include <prometheus/text_serializer.h>

#include <utility>
#include <vector>

#include "metrics/process_memory.h"

namespace loco {

std::string MetricsText(const prometheus::Registry& registry) {
  std::vector<prometheus::MetricFamily> families = registry.Collect();
  for (prometheus::MetricFamily& f : ProcessMemoryFamilies()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace loco

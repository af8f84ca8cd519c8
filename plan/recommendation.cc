#include "plan/recommendation.h"

#include <algorithm>
#include <vector>

#include "common/format_double.h"

namespace loco::plan {

StatusOr<ShardRecommendation> RecommendShards(const ClusterSpec& spec,
                                              const Calibration& calibration,
                                              uint32_t max_shards, double tolerance) {
  if (max_shards == 0) return InvalidArgument("--max-shards must be >= 1");
  if (!(tolerance >= 0 && tolerance <= 1)) {
    return InvalidArgument("--tolerance " + FormatDouble(tolerance) + " is not in [0, 1]");
  }
  const uint64_t blocks = spec.shard_align == 0
                              ? 0
                              : (spec.params + spec.shard_align - 1) / spec.shard_align;
  const uint32_t last = static_cast<uint32_t>(std::min<uint64_t>(max_shards, blocks));
  std::vector<Prediction> by_count;
  ClusterSpec candidate = spec;
  for (uint32_t s = 1; s <= std::max<uint32_t>(last, 1); ++s) {
    candidate.shards = s;
    StatusOr<Prediction> p = Predict(candidate, calibration);
    if (!p.ok()) return p.status();
    by_count.push_back(*p);
  }
  ShardRecommendation r;
  const auto fastest = std::min_element(
      by_count.begin(), by_count.end(),
      [](const Prediction& a, const Prediction& b) { return a.step_s < b.step_s; });
  r.fastest_shards = fastest->shards;
  r.fastest_step_s = fastest->step_s;
  for (const Prediction& p : by_count) {
    if (p.step_s <= r.fastest_step_s * (1 + tolerance)) {
      r.shards = p.shards;
      r.recommended = p;
      break;
    }
  }
  return r;
}

}  // namespace loco::plan

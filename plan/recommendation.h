// RecommendShards: how many parameter servers a cluster needs.
//
// The rule: predict the step for every shard count from 1 to max_shards
// (fewer when the model has fewer aligned blocks), and recommend the
// smallest count whose step is within `tolerance` (0.05 = 5 %) of the
// fastest one: more servers past that point cost machines and buy
// (almost) nothing.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "plan/calibration.h"
#include "plan/cluster_spec.h"
#include "plan/cost_model.h"

namespace loco::plan {

struct ShardRecommendation {
  uint32_t shards = 0;       // the recommended count
  Prediction recommended;    // its prediction
  uint32_t fastest_shards = 0;
  double fastest_step_s = 0;  // the fastest count's step
};

// `spec.shards` is ignored. InvalidArgument for an invalid spec, max_shards
// 0, or a tolerance that is not in [0, 1].
StatusOr<ShardRecommendation> RecommendShards(const ClusterSpec& spec,
                                              const Calibration& calibration,
                                              uint32_t max_shards, double tolerance);

}  // namespace loco::plan

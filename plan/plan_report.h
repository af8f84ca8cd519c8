// The planner's output: a prediction (and the shard recommendation) as
// text for people or as one JSON object for scripts (bench/plan/validate.py).
#pragma once

#include <string>

#include "plan/calibration.h"
#include "plan/cluster_spec.h"
#include "plan/cost_model.h"
#include "plan/recommendation.h"

namespace loco::plan {

struct PlanReport {
  std::string calibration_path;
  Calibration calibration;
  ClusterSpec spec;  // with the shards predicted for
  Prediction prediction;
  ShardRecommendation recommendation;
  double tolerance = 0.05;
};

std::string FormatPlanText(const PlanReport& report);
// One line of JSON: every figure of the text, numbers with %.17g.
std::string FormatPlanJson(const PlanReport& report);

}  // namespace loco::plan

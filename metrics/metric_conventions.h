// Conventions every LoCo-PS metric follows, in one place: the histogram
// buckets for durations and the label value naming a refusal's reason.
//
// Label values are bounded sets: a reason is one of the gRPC status codes
// (lower case), a direction is "push" or "pull", a shard id is below the
// cluster's shard count. Worker ids never appear as label values on server
// or coordinator metrics (they are unbounded over an elastic run); per-worker
// figures live on each worker's own /metrics, told apart by the scrape target.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace loco {

// Duration buckets in seconds, 0.5 ms .. 60 s: RPCs on loopback take well
// under a millisecond, a straggler wait or checkpoint can take seconds.
const std::vector<double>& DurationBucketsSeconds();

// "invalid_argument", "failed_precondition", ... (StatusCodeName in lower case).
std::string ReasonLabel(StatusCode code);

}  // namespace loco

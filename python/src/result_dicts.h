// What the Python side sees of loco::StepResult and loco::TrafficStats:
// plain dicts keyed by the C++ field names (client/worker_stats.h), so that
// a training loop can log them as they are.
#pragma once

#include <pybind11/pybind11.h>

#include "client/worker_stats.h"

namespace loco::python {

// {"step", "resynced", "nonfinite", "error_sq_norm", "push_wire_bytes",
//  "push_fp32_bytes", "pull_wire_bytes", "pull_fp32_bytes", "seconds",
//  "compute_seconds"}. GIL held.
pybind11::dict StepResultDict(const StepResult& result);

// {"push_wire_bytes", "push_fp32_bytes", "pull_wire_bytes",
//  "pull_fp32_bytes", "steps", "resyncs", "nonfinite"}. GIL held.
pybind11::dict TrafficDict(const TrafficStats& traffic);

}  // namespace loco::python

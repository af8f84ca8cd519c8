// FitCalibration: the cost model's constants from measured runs.
//
// Time: the eight step-time constants minimise the mean squared log ratio
// of predicted to measured step (every run weighs the same whatever its
// length), by Nelder-Mead over their logarithms (so each stays positive;
// the link efficiency is capped at 1). Memory: the four server-memory
// constants by linear least squares over the runs that measured a server's
// peak RSS (negative solutions clamped to 0). Server CPU: the six
// server_cpu_s_* constants by least squares of the relative error, each
// >= 0, over the runs that measured it (at least six; otherwise
// server_cpu_runs = 0 and the step model's constants stand in).
// Deterministic.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "plan/calibration.h"
#include "plan/measured_runs.h"

namespace loco::plan {

// `source` is recorded in the calibration (the runs' file). InvalidArgument
// with fewer runs than time constants (8).
StatusOr<Calibration> FitCalibration(const std::vector<MeasuredRun>& runs,
                                     const std::string& source);

// sqrt(mean((predicted / measured - 1)^2)) of the step time over `runs`.
double RmsRelativeError(const std::vector<MeasuredRun>& runs, const Calibration& calibration);
// The same of the server CPU per step, over the runs that measured it (0
// when none did).
double ServerCpuRmsRelativeError(const std::vector<MeasuredRun>& runs,
                                 const Calibration& calibration);

}  // namespace loco::plan

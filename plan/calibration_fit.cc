#include "plan/calibration_fit.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "plan/cost_model.h"
#include "plan/nelder_mead.h"

namespace loco::plan {
namespace {

constexpr size_t kTimeConstants = 8;
// Restarts of the simplex from the best point so far, and steps in each:
// a restart escapes a simplex that collapsed along one axis.
constexpr int kRounds = 4, kIterations = 4000;

std::array<double Calibration::*, kTimeConstants> TimeFields() {
  return {&Calibration::worker_s_per_param_sample, &Calibration::worker_s_per_element,
          &Calibration::server_s_per_element_payload, &Calibration::server_s_per_element,
          &Calibration::cpu_s_per_byte, &Calibration::cpu_s_per_message,
          &Calibration::step_overhead_s, &Calibration::link_efficiency};
}

// Plausible orders of magnitude on a CPU machine; the fit moves from here.
std::vector<double> StartingLogs() {
  const std::array<double, kTimeConstants> start = {5e-11, 5e-10, 2e-10, 5e-10,
                                                    5e-10, 1e-4,  1e-3,  0.95};
  std::vector<double> logs;
  for (double v : start) logs.push_back(std::log(v));
  return logs;
}

void SetTimeConstants(const std::vector<double>& logs, Calibration* c) {
  const auto fields = TimeFields();
  for (size_t k = 0; k < kTimeConstants; ++k) c->*fields[k] = std::exp(logs[k]);
  c->link_efficiency = std::min(1.0, c->link_efficiency);
}

double MeanSquaredLogRatio(const std::vector<MeasuredRun>& runs, const Calibration& c) {
  double sum = 0;
  for (const MeasuredRun& run : runs) {
    StatusOr<Prediction> p = Predict(run.spec, c);
    if (!p.ok() || !(p->step_s > 0)) return 1e30;
    const double r = std::log(p->step_s / run.step_s);
    sum += r * r;
  }
  return sum / static_cast<double>(runs.size());
}

void FitTime(const std::vector<MeasuredRun>& runs, Calibration* c) {
  auto objective = [&](const std::vector<double>& logs) {
    Calibration trial = *c;
    SetTimeConstants(logs, &trial);
    return MeanSquaredLogRatio(runs, trial);
  };
  SimplexResult best{StartingLogs(), objective(StartingLogs())};
  for (int round = 0; round < kRounds; ++round) {
    SimplexResult r = MinimizeNelderMead(objective, best.x, 0.5, kIterations);
    if (r.value <= best.value) best = r;
  }
  SetTimeConstants(best.x, c);
}

// Solves the 4x4 system a x = b by Gauss-Jordan elimination with partial
// pivoting; a singular column's unknown is left 0.
std::array<double, 4> Solve4(std::array<std::array<double, 4>, 4> a, std::array<double, 4> b) {
  std::array<int, 4> pivot_row_of = {-1, -1, -1, -1};
  for (size_t col = 0, row = 0; col < 4 && row < 4; ++col) {
    size_t pivot = row;
    for (size_t r = row + 1; r < 4; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    if (std::fabs(a[pivot][col]) < 1e-300) continue;
    std::swap(a[row], a[pivot]);
    std::swap(b[row], b[pivot]);
    for (size_t r = 0; r < 4; ++r) {
      if (r == row) continue;
      const double f = a[r][col] / a[row][col];
      for (size_t k = 0; k < 4; ++k) a[r][k] -= f * a[row][k];
      b[r] -= f * b[row];
    }
    pivot_row_of[col] = static_cast<int>(row);
    ++row;
  }
  std::array<double, 4> x{};
  for (size_t col = 0; col < 4; ++col) {
    if (pivot_row_of[col] >= 0) {
      const size_t row = static_cast<size_t>(pivot_row_of[col]);
      x[col] = b[row] / a[row][col];
    }
  }
  return x;
}

// The memory model's features of one run: 1, shard elements, shard
// elements under the delta return, all pushes of a step to the shard; and
// its target, the measured RSS less the answer the server holds.
void FitMemory(const std::vector<MeasuredRun>& runs, Calibration* c) {
  std::array<std::array<double, 4>, 4> normal{};
  std::array<double, 4> rhs{};
  size_t used = 0;
  for (const MeasuredRun& run : runs) {
    if (!(run.server_rss_bytes > 0)) continue;
    StatusOr<Prediction> p = Predict(run.spec, *c);
    if (!p.ok()) continue;
    const double shard = static_cast<double>(p->largest_shard);
    const bool delta = run.spec.pull.codec == WireCodec::kBlockQuant;
    const std::array<double, 4> features = {1.0, shard, delta ? shard : 0.0,
                                            static_cast<double>(p->push_bytes_per_server)};
    const double target = run.server_rss_bytes -
                          static_cast<double>(p->pull_bytes_per_server) / run.spec.workers;
    for (size_t i = 0; i < 4; ++i) {
      for (size_t j = 0; j < 4; ++j) normal[i][j] += features[i] * features[j];
      rhs[i] += features[i] * target;
    }
    ++used;
  }
  if (used < 4) return;
  const std::array<double, 4> x = Solve4(normal, rhs);
  c->server_fixed_bytes = std::max(0.0, x[0]);
  c->server_bytes_per_element = std::max(0.0, x[1]);
  c->server_delta_bytes_per_element = std::max(0.0, x[2]);
  c->server_push_held_fraction = std::clamp(x[3], 0.0, 1.0);
}

constexpr size_t kServerCpuConstants = 6;

std::array<double Calibration::*, kServerCpuConstants> ServerCpuFields() {
  return {&Calibration::server_cpu_s_per_byte, &Calibration::server_cpu_s_per_fp32_byte,
          &Calibration::server_cpu_s_per_stream_s,
          &Calibration::server_cpu_s_per_message, &Calibration::server_cpu_s_per_element_payload,
          &Calibration::server_cpu_s_per_element};
}

std::array<double, kServerCpuConstants> TermsArray(const ServerCpuTerms& t) {
  return {t.bytes, t.fp32_bytes, t.stream_s, t.messages, t.payload_elements, t.elements};
}

// Least squares of the relative error, every constant >= 0: minimises
// sum_i (a_i . x - 1)^2 over x >= 0, where row a_i is run i's terms over
// its measured CPU, by cyclic coordinate descent on the normal equations
// with the columns scaled to unit length (a convex problem: it converges
// to the minimum; the sweep count is far more than 6 unknowns need).
std::array<double, kServerCpuConstants> NonNegativeRelativeFit(
    const std::vector<std::array<double, kServerCpuConstants>>& rows) {
  constexpr size_t k = kServerCpuConstants;
  std::array<double, k> scale{};
  for (const auto& a : rows) {
    for (size_t j = 0; j < k; ++j) scale[j] += a[j] * a[j];
  }
  for (double& v : scale) v = v > 0 ? std::sqrt(v) : 1;
  std::array<std::array<double, k>, k> gram{};
  std::array<double, k> rhs{};
  for (const auto& a : rows) {
    for (size_t i = 0; i < k; ++i) {
      rhs[i] += a[i] / scale[i];
      for (size_t j = 0; j < k; ++j) gram[i][j] += a[i] / scale[i] * a[j] / scale[j];
    }
  }
  std::array<double, k> y{};
  for (int sweep = 0; sweep < 20000; ++sweep) {
    for (size_t j = 0; j < k; ++j) {
      if (!(gram[j][j] > 0)) continue;
      double r = rhs[j];
      for (size_t i = 0; i < k; ++i) {
        if (i != j) r -= gram[j][i] * y[i];
      }
      y[j] = std::max(0.0, r / gram[j][j]);
    }
  }
  std::array<double, k> x{};
  for (size_t j = 0; j < k; ++j) x[j] = y[j] / scale[j];
  return x;
}

// The server CPU model's constants, from the runs that measured the
// server's CPU; with fewer runs than constants, the step model's (see
// Calibration::server_cpu_runs).
void FitServerCpu(const std::vector<MeasuredRun>& runs, Calibration* c) {
  std::vector<std::array<double, kServerCpuConstants>> rows;
  for (const MeasuredRun& run : runs) {
    if (!(run.server_cpu_s > 0)) continue;
    StatusOr<Prediction> p = Predict(run.spec, *c);
    if (!p.ok()) continue;
    std::array<double, kServerCpuConstants> a = TermsArray(ServerCpuTermsOf(run.spec, *p));
    for (double& v : a) v /= run.server_cpu_s;
    rows.push_back(a);
  }
  c->server_cpu_runs = 0;
  for (double Calibration::*field : ServerCpuFields()) c->*field = 0;
  if (rows.size() < kServerCpuConstants) return;
  const std::array<double, kServerCpuConstants> x = NonNegativeRelativeFit(rows);
  const auto fields = ServerCpuFields();
  for (size_t j = 0; j < kServerCpuConstants; ++j) c->*fields[j] = x[j];
  c->server_cpu_runs = rows.size();
}

}  // namespace

double ServerCpuRmsRelativeError(const std::vector<MeasuredRun>& runs,
                                 const Calibration& calibration) {
  double sum = 0;
  size_t n = 0;
  for (const MeasuredRun& run : runs) {
    if (!(run.server_cpu_s > 0)) continue;
    StatusOr<Prediction> p = Predict(run.spec, calibration);
    if (!p.ok()) continue;
    const double e = p->server_cpu_s / run.server_cpu_s - 1;
    sum += e * e;
    ++n;
  }
  return n ? std::sqrt(sum / static_cast<double>(n)) : 0;
}

double RmsRelativeError(const std::vector<MeasuredRun>& runs, const Calibration& calibration) {
  double sum = 0;
  size_t n = 0;
  for (const MeasuredRun& run : runs) {
    StatusOr<Prediction> p = Predict(run.spec, calibration);
    if (!p.ok()) continue;
    const double e = p->step_s / run.step_s - 1;
    sum += e * e;
    ++n;
  }
  return n ? std::sqrt(sum / static_cast<double>(n)) : 0;
}

StatusOr<Calibration> FitCalibration(const std::vector<MeasuredRun>& runs,
                                     const std::string& source) {
  if (runs.size() < kTimeConstants) {
    return InvalidArgument("calibration needs >= " + std::to_string(kTimeConstants) +
                           " measured runs (one per time constant), got " +
                           std::to_string(runs.size()));
  }
  Calibration c;
  // The server CPU model first: with dedicated cores the step's server
  // phases spend its seconds (plan/cost_model.cc), so a run measured so
  // fits the time constants around it.
  FitServerCpu(runs, &c);
  FitTime(runs, &c);
  FitMemory(runs, &c);
  c.server_cpu_rms_relative_error = ServerCpuRmsRelativeError(runs, c);
  c.source = source;
  c.runs = runs.size();
  c.rms_relative_error = RmsRelativeError(runs, c);
  return c;
}

}  // namespace loco::plan

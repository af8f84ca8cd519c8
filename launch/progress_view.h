// ProgressView: renders training progress at a steady rate. On a terminal a
// single self-updating bar with ETA; otherwise one plain line per period, so
// that logs and CI output stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace loco {

struct ProgressSnapshot {
  uint64_t step = 0;
  uint64_t total_steps = 0;
  double loss = 0;
  double samples_per_s = 0;
  double wire_bytes = 0;  // push + pull, all workers
  double fp32_bytes = 0;  // what the same traffic would take in fp32
  int workers = 0;
};

class ProgressView {
 public:
  enum class Mode { kBar, kPlain, kNone };
  // `out` is not owned. period: minimum time between two renders.
  ProgressView(Mode mode, std::FILE* out, std::chrono::milliseconds period);
  // Renders if the period has passed since the last render (or force).
  void Update(const ProgressSnapshot& s, bool force = false);
  // Ends the bar line (terminal mode).
  void Finish();
  static std::string FormatLine(const ProgressSnapshot& s, double elapsed_s, bool bar);

 private:
  Mode mode_;
  std::FILE* out_;
  std::chrono::milliseconds period_;
  std::chrono::steady_clock::time_point start_, last_;
  bool rendered_ = false;
};

}  // namespace loco

// MeasuredRun: one measured configuration of bench/e2e, as the calibration
// reads it from a CSV file (bench/plan/measured.csv; bench/plan/README.md
// says where each row comes from).
//
// Columns, by name in the header line, any order, more allowed:
//   label, params, workers, servers, batch_per_worker, link_mbit,
//   codec (loco|fp32|bf16), bits, block, pull_codec (delta|bf16|fp32),
//   pull_bits, pull_block, host_cores, step_s, server_rss_mb (empty = not
//   measured); optionally server_cpu_s (the busiest server's CPU seconds
//   per step; absent or empty = not measured).
// The runs are bench/e2e's: every process on one host of host_cores cores,
// one shaped link of link_mbit per worker, and the servers behind the W
// worker links (so a server's share of them is W x link / S).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "plan/cluster_spec.h"

namespace loco::plan {

struct MeasuredRun {
  std::string label;
  ClusterSpec spec;
  double step_s = 0;
  double server_rss_bytes = 0;  // 0 = not measured
  double server_cpu_s = 0;      // 0 = not measured
};

// Parses the CSV text; InvalidArgument naming the line and column of the
// first bad value, or the missing column.
StatusOr<std::vector<MeasuredRun>> ParseMeasuredRuns(const std::string& csv_text);
StatusOr<std::vector<MeasuredRun>> ReadMeasuredRuns(const std::string& path);

}  // namespace loco::plan

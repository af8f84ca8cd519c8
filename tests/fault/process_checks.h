// What the process tests of tests/fault check at the end of a scenario, and
// loco-launch run as a process: shared by fault_process_test.cc and
// coordinator_restart_process_test.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fault/process_cluster.h"

namespace loco::test {

std::string ReadFile(const std::string& path);

// All shards at `steps`; every finished worker's final copy (its "done"
// params_crc) is the servers' (ServerParamsCrc); at least one finished.
// Uses gtest assertions: call under ASSERT_NO_FATAL_FAILURE.
void ExpectConsistent(ProcessCluster& c, uint64_t steps);

// The params_crc a worker reported in its step event for `step`; empty if none.
std::string CrcAtStep(const WorkerProcess& w, uint64_t step);

bool EveryWorkerReported(ProcessCluster& c);

struct LaunchResult {
  int exit_code = -1;
  std::string out, err;
  std::string log_dir;  // the run's --log-dir
};

// Runs loco-launch (with a log folder of its own, --progress=none, a small
// model) to completion, bounded by `timeout`.
LaunchResult RunLaunch(const std::string& name, std::vector<std::string> args,
                       std::chrono::seconds timeout);

}  // namespace loco::test

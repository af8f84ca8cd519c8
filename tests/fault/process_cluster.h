// ProcessCluster: a LoCo-PS cluster of real processes on loopback — the
// project's loco-coordinator, loco-server and loco-worker binaries — that a
// test can break (kill, stop, restart) and then inspect: the workers' JSON
// events and, over gRPC, the shards' versions and parameters.
//
// Every wait is bounded (WaitFor takes a timeout). Children are SIGKILLed
// when the cluster is destroyed. Not thread-safe: one test thread drives it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launch/child_process.h"
#include "launch/flat_json.h"

namespace loco::test {

struct ProcessClusterOptions {
  std::string name = "cluster";  // names the log folder
  int servers = 2;
  int workers = 2;
  uint64_t steps = 100;
  std::string hidden = "64";
  int global_batch = 128;
  int64_t heartbeat_timeout_ms = 2000;
  int64_t heartbeat_interval_ms = 200;
  std::string pull_codec = "fp32";
  bool checkpoints = false;  // --checkpoint-dir=<log dir>/checkpoints
  uint64_t checkpoint_every = 10;
  std::vector<std::string> server_args;
  std::vector<std::string> worker_args;  // --report-params-crc is always passed
  // For KillCoordinator/RestartCoordinator: the coordinator listens on a
  // port picked up front (a restart must come back where the others dial)
  // and keeps a state directory in the log folder (coordinator_state_dir:
  // the incarnation, and the ticket key it creates there, so that tickets
  // stay valid across a restart); servers re-register every reregister_ms.
  bool restartable_coordinator = false;
  int64_t reregister_ms = 200;
};

// One worker process and everything it printed.
struct WorkerProcess {
  std::unique_ptr<ChildProcess> child;
  std::vector<FlatJson> events;
  uint64_t step = 0;  // latest "step" (or "done" steps) it reported
  bool done = false;

  // The first event of `kind` (optionally with key == value); null if none.
  const FlatJson* Find(const std::string& kind, const std::string& key = "",
                       const std::string& value = "") const;
};

class ProcessCluster {
 public:
  explicit ProcessCluster(ProcessClusterOptions options);
  ~ProcessCluster();
  ProcessCluster(const ProcessCluster&) = delete;
  ProcessCluster& operator=(const ProcessCluster&) = delete;

  // Starts the coordinator and the servers (each up to 30 s to announce its
  // port), then the workers.
  ::testing::AssertionResult Start();
  // Starts one more worker; `extra_args` follow options.worker_args.
  ::testing::AssertionResult StartWorker(const std::vector<std::string>& extra_args = {});
  // Starts shard k's server again on its port; *restored receives its
  // "RESTORED ..." line (empty when it found no checkpoint).
  ::testing::AssertionResult RestartServer(int k, std::string* restored);
  // SIGKILLs the coordinator and waits (up to 10 s) until it is reaped.
  ::testing::AssertionResult KillCoordinator();
  // Starts the coordinator again with the argv it was first started with
  // (so on its port, with its ticket key); needs restartable_coordinator.
  ::testing::AssertionResult RestartCoordinator();

  // Reads every worker's new events.
  void Poll();
  // Polls every 50 ms until pred() holds; false after `timeout`.
  bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout);
  // Waits until every worker process exited; false after `timeout`.
  bool WaitForWorkersToExit(std::chrono::milliseconds timeout);
  uint64_t MaxStep() const;

  // The version of every shard (ShardStatus over gRPC).
  ::testing::AssertionResult ShardVersions(std::vector<uint64_t>* versions);
  // CRC-32 of the concatenated full fp32 copies of every shard (what a
  // joining worker would receive), as the workers compute "params_crc".
  ::testing::AssertionResult ServerParamsCrc(std::string* crc);

  WorkerProcess& worker(size_t i) { return workers_[i]; }
  size_t num_workers() const { return workers_.size(); }
  ChildProcess& server(int k) { return *servers_[k]; }
  ChildProcess& coordinator() { return *coordinator_; }
  const std::string& log_dir() const { return log_dir_; }
  std::string checkpoint_dir() const { return log_dir_ + "/checkpoints"; }
  std::string coordinator_state_dir() const { return log_dir_ + "/coordinator-state"; }
  // The last lines of every child's log, for failure messages.
  std::string Logs() const;

 private:
  ::testing::AssertionResult StartListener(const std::string& name,
                                           std::vector<std::string> argv,
                                           std::unique_ptr<ChildProcess>* out,
                                           std::string* address, std::string* preamble);

  ProcessClusterOptions options_;
  std::string log_dir_;
  std::unique_ptr<ChildProcess> coordinator_;
  std::vector<std::string> coordinator_argv_;
  std::vector<std::unique_ptr<ChildProcess>> retired_coordinators_;  // killed; for Logs()
  std::string coordinator_address_;
  int coordinator_restarts_ = 0;
  std::vector<std::unique_ptr<ChildProcess>> servers_;
  std::vector<std::vector<std::string>> server_argv_;
  std::vector<std::string> server_addresses_;
  std::vector<WorkerProcess> workers_;
  int restarts_ = 0;
};

}  // namespace loco::test

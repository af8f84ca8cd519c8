// Launcher: runs a whole local cluster as separate processes on loopback —
// one coordinator, S parameter servers and W workers — shows progress, and
// returns the final figures.
//
// Children pick free ports themselves (--port 0) and announce them on stdout
// ("LISTENING host:port"), so there is no port race. Workers print one JSON
// event per line on stdout (see worker/worker_main.cc); the launcher sums
// them. Every wait is bounded: startup by startup_timeout_s, the whole run by
// timeout_s.
//
// Faults are events, not failures, as long as training can complete: a worker
// that dies or leaves is reported and the others carry on; a server that dies
// is restarted on its port (at most max_server_restarts times) and resumes
// from its checkpoint. The run fails, with an error that names the child, how
// it ended and the tail of its log, when the coordinator dies other than by a
// kill-coordinator fault, when a server or the coordinator cannot be
// restarted, or when every worker is lost before finishing. The summary says
// what was lost.
//
// A kill-coordinator fault SIGKILLs the coordinator and restarts it after
// its delay with the same argv: then the coordinator is started on a port
// picked up front (--port=N, the one exception to --port 0, since the others
// dial it by address) and with a --state-dir in the log folder, where the
// coordinator keeps its incarnation and the ticket key it makes on its first
// start, so that the workers' tickets stay valid across the restart.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "launch/child_process.h"
#include "launch/coordinator_outage.h"
#include "launch/flat_json.h"
#include "launch/launch_options.h"
#include "launch/launch_summary.h"
#include "launch/local_prometheus.h"
#include "launch/progress_view.h"

namespace loco {

class Launcher {
 public:
  // `interrupted` (nullable, not owned) is polled; when it becomes non-zero
  // the run stops every child and returns Aborted.
  Launcher(LaunchOptions options, const volatile std::sig_atomic_t* interrupted);
  ~Launcher();
  Status Run(LaunchSummary* summary);

 private:
  using Clock = std::chrono::steady_clock;
  struct WorkerState;
  // What the workers' states add up to after one poll.
  struct WorkerTally {
    size_t done = 0;      // ended after finishing
    size_t ended = 0;     // exited, for any reason
    size_t awaiting = 0;  // joiners still waiting for their step
    uint64_t max_step = 0;
  };

  // Run's phases, in order (the children's flags were checked before:
  // child_flags_check.h's PreflightChildFlags).
  Status StartPrometheus();
  Status StartCoordinator(std::string* address);
  Status StartServers(const std::string& coordinator);
  // The W initial workers, then one per join-worker fault.
  Status StartWorkers(const std::string& coordinator);
  void StartJoiners();
  // Watches the run until training ends, fails or is interrupted, showing
  // progress and firing faults.
  Status Supervise(Clock::time_point started);
  Status CheckCleanShutdown() const;
  LaunchSummary Summarize(Clock::time_point started) const;

  // Supervise's steps.
  WorkerTally PollWorkers();
  void HandleWorkerEvent(size_t worker, const FlatJson& event);
  void RecordWorkerProgress(const std::string& kind, const FlatJson& event, WorkerState* state);
  void AccountForWorkerExit(size_t worker);
  Status AllWorkersLost() const;
  // The coordinator must live unless a kill-coordinator fault killed it (it
  // is then restarted when due); a dead server is restarted.
  Status CheckCoordinatorAndServers(uint64_t max_step);
  Status CheckCoordinator(uint64_t max_step);
  // Says so when training ended inside a coordinator outage.
  void ReportUnfinishedOutage(uint64_t max_step);
  ProgressSnapshot Snapshot(const WorkerTally& tally) const;
  void ReportJoinersThatNeverJoined(uint64_t max_step);

  // How the local Prometheus labels a child's /metrics endpoint: the role
  // and the process, which a restarted server or coordinator keeps (its
  // target moves to the port the new process announces).
  struct ScrapeLabels {
    std::string role, process;
  };
  // Starts a child that prints "LISTENING host:port" once serving and
  // waits for that line; with a local Prometheus, then for the
  // "METRICS host:port" it prints next (AddMetrics gave it
  // --metrics-port=-1), whose port is scraped under `labels`. The child
  // goes into `*slot`, which keeps it whether it started or not; lines
  // before LISTENING go to *preamble (nullable).
  Status StartListener(const std::string& name, std::vector<std::string> argv,
                       const ScrapeLabels& labels, std::unique_ptr<ChildProcess>* slot,
                       std::string* address, std::vector<std::string>* preamble = nullptr);
  // With a local Prometheus, waits (until `deadline`) for the "METRICS
  // host:port" line a started listener prints after LISTENING and scrapes
  // that port under `labels`.
  Status ScrapeAnnouncedPort(ChildProcess& child, const ScrapeLabels& labels,
                             std::chrono::steady_clock::time_point deadline);
  // Starts worker-<n>. An initial worker (no `join_at_step`) waits at step 0
  // for all W initial workers (--wait-for-workers); a joiner of a
  // join-worker fault starts at launch, so that its data and model are ready
  // in time, and joins once the cluster reaches its step (--join-at-step).
  Status StartWorker(std::optional<uint64_t> join_at_step);
  // With a local Prometheus: asks the child for a /metrics endpoint on any
  // free port (--metrics-port=-1), which it announces once bound; the
  // launcher scrapes it from then on. The launcher never picks the port
  // itself: another process could take it before the child binds it.
  void AddMetrics(std::vector<std::string>* argv) const;
  // A worker's "metrics" event: scrapes the port it announced.
  void ScrapeWorker(const std::string& name, const FlatJson& event);
  // Restarts shard's server on its port after it died at about `at_step`.
  Status RestartServer(size_t shard, uint64_t at_step);
  void FireFaults(uint64_t max_step);
  void FireKillWorker(const Fault& fault, uint64_t max_step);
  void FireKillServer(const Fault& fault, uint64_t max_step);
  // False (the fault stays pending) while the coordinator is still down
  // from an earlier one.
  bool FireKillCoordinator(const Fault& fault, uint64_t max_step);
  bool PlansCoordinatorRestart() const;
  // Fixes the coordinator's port and gives it a state directory (its
  // ticket key), so that a restart with the same argv is the same
  // coordinator to the others.
  Status PrepareCoordinatorForRestarts(std::vector<std::string>* argv);
  Status RestartCoordinator(uint64_t at_step);
  void Event(const std::string& what);
  Status ChildFailure(const ChildProcess& child, const std::string& what) const;
  void StopAll();

  LaunchOptions options_;
  const uint64_t total_steps_;
  const volatile std::sig_atomic_t* interrupted_;
  std::unique_ptr<ChildProcess> coordinator_;
  std::vector<std::string> coordinator_argv_;  // as first started; a restart reuses it
  CoordinatorOutage coordinator_outage_;
  std::vector<std::unique_ptr<ChildProcess>> servers_;  // per shard
  std::vector<std::unique_ptr<ChildProcess>> workers_;
  std::vector<WorkerState> worker_states_;              // per worker, as reported
  std::vector<std::vector<std::string>> server_argv_;  // per shard, --port=0 as started
  std::vector<std::string> server_address_;            // per shard, as first announced
  std::vector<std::string> worker_argv_;               // without --name
  LaunchSummary faults_so_far_;                        // fault counts and events
  const ChildProcess* last_lost_worker_ = nullptr;     // for the error when all are lost
  bool blas_advice_shown_ = false;                     // the workers' BLAS note, once
  std::unique_ptr<LocalPrometheus> prometheus_;        // null unless prometheus_binary
};

}  // namespace loco

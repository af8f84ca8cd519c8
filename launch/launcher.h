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
// it ended and the tail of its log, when the coordinator dies, when a server
// cannot be restarted, or when every worker is lost before finishing. The
// summary says what was lost.
#pragma once

#include <csignal>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/transport_security_options.h"
#include "launch/child_process.h"
#include "launch/fault_plan.h"
#include "launch/local_prometheus.h"
#include "launch/progress_view.h"

namespace loco {

struct LaunchOptions {
  std::string bin_dir;  // where loco-coordinator, loco-server, loco-worker live
  std::string log_dir;  // one stderr log per child
  int servers = 2;
  int workers = 4;
  int64_t epochs = 2;
  int64_t steps = 0;  // 0 = epochs * ceil(train_examples / global_batch)
  int64_t train_examples = 60000;
  int64_t global_batch = 256;
  std::string codec = "loco";
  int64_t bits = 4;
  int64_t block_size = 256;
  double lr = 1e-3;
  std::string pull_codec;   // empty = the server's default
  std::string hidden;       // empty = the worker's default
  std::string data_dir;     // empty = the worker's default
  int64_t seed = 1;
  int64_t heartbeat_timeout_ms = 5000;
  std::vector<std::string> server_args;  // extra flags for every server
  std::vector<std::string> worker_args;  // extra flags for every worker
  // Handed to every child (before server_args/worker_args), each the flags
  // its role takes. The children refuse options that are neither TLS nor
  // plaintext, so loco-launch asks for plaintext when given no TLS material.
  TransportSecurityOptions security = TransportSecurityOptions::Insecure();
  // Server checkpoints: --checkpoint-dir for every server (and
  // --checkpoint-every when > 0). Empty = none, unless a kill-server fault
  // needs one: then log_dir/checkpoints.
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  std::vector<Fault> faults;
  int max_server_restarts = 3;  // over the whole run
  // Path of a prometheus binary: when set, every child serves /metrics on a
  // port of its own and a local Prometheus scrapes them all. Empty = none.
  std::string prometheus_binary;
  ProgressView::Mode progress = ProgressView::Mode::kPlain;
  int64_t progress_period_ms = 2000;
  int64_t startup_timeout_s = 60;
  int64_t timeout_s = 3600;
};

struct LaunchSummary {
  double test_accuracy = -1;  // -1 when no worker reported one
  uint64_t steps = 0;
  double wall_s = 0;
  double push_wire_bytes = 0, push_fp32_bytes = 0;
  double pull_wire_bytes = 0, pull_fp32_bytes = 0;
  // Mean training loss over each worker's first and last 10 reported steps,
  // averaged over workers.
  double first_loss = 0;
  double final_loss = 0;
  // What the run lost, and the events in order ("worker-2 lost ...").
  int workers_lost = 0, workers_left = 0, workers_joined = 0, server_restarts = 0;
  uint64_t server_steps_lost = 0;  // steps between a crash and the checkpoint resumed from
  std::vector<std::string> events;
  std::string ToJson(const LaunchOptions& o) const;
  std::string ToText() const;
};

class Launcher {
 public:
  // `interrupted` (nullable, not owned) is polled; when it becomes non-zero
  // the run stops every child and returns Aborted.
  Launcher(LaunchOptions options, const volatile std::sig_atomic_t* interrupted);
  ~Launcher();
  Status Run(LaunchSummary* summary);

 private:
  struct WorkerState;
  // Starts a child that prints "LISTENING host:port" and appends it to
  // infra_; lines before that one go to *preamble (nullable).
  Status StartListener(const std::string& name, std::vector<std::string> argv,
                       std::string* address, std::vector<std::string>* preamble = nullptr);
  // Starts worker-<n>. An initial worker (no `join_at_step`) waits at step 0
  // for all W initial workers (--wait-for-workers); a joiner of a
  // join-worker fault starts at launch, so that its data and model are ready
  // in time, and joins once the cluster reaches its step (--join-at-step).
  Status StartWorker(std::optional<uint64_t> join_at_step);
  // With a local Prometheus: gives the child a metrics port and scrapes it.
  Status AddMetrics(const std::string& role, const std::string& name,
                    std::vector<std::string>* argv);
  // Restarts shard k's server on its port after it died at about `at_step`.
  Status RestartServer(size_t k, uint64_t at_step);
  void FireFaults(uint64_t max_step, const std::vector<WorkerState>& state);
  void Event(const std::string& what);
  Status ChildFailure(const ChildProcess& c, const std::string& what) const;
  void StopAll();
  uint64_t TotalSteps() const;

  LaunchOptions o_;
  const volatile std::sig_atomic_t* interrupted_;
  std::vector<std::unique_ptr<ChildProcess>> infra_;  // coordinator, then servers
  std::vector<std::unique_ptr<ChildProcess>> workers_;
  std::vector<std::vector<std::string>> server_argv_;  // per shard, --port=0 as started
  std::vector<std::string> server_address_;            // per shard, as first announced
  std::vector<std::string> worker_argv_;               // without --name
  LaunchSummary sum_;                                  // fault counts and events so far
  bool blas_advice_shown_ = false;                     // the workers' BLAS note, once
  std::unique_ptr<LocalPrometheus> prometheus_;        // null unless prometheus_binary
};

}  // namespace loco

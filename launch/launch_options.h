// LaunchOptions: what loco-launch runs (the cluster's shape, the training
// settings it hands the children, faults, limits), filled from its flags.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/transport_security_options.h"
#include "launch/fault_plan.h"
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

  // The step training ends at: `steps`, or `epochs` passes over the
  // training examples.
  uint64_t total_steps() const {
    if (steps > 0) return static_cast<uint64_t>(steps);
    return static_cast<uint64_t>(epochs) *
           static_cast<uint64_t>((train_examples + global_batch - 1) / global_batch);
  }
};

}  // namespace loco

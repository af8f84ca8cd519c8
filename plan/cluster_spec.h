// ClusterSpec: the cluster and training configuration the planner predicts
// for. Plain data; ValidateClusterSpec checks it.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "plan/payload_size.h"

namespace loco::plan {

// loco-server's largest --apply-threads (server/shard_machine.h's
// kMaxApplyThreads; plan/ does not depend on server/).
inline constexpr uint32_t kMaxApplyThreads = 64;

// How the processes are placed on machines.
//   shared_cores == 0: each worker node and each server on a machine of its
//     own (worker_cores, server_cores), joined by a full-bisection network.
//   shared_cores > 0: every worker and server process on one host of that
//     many cores, as in bench/e2e (each link still shaped on its own).
struct ClusterSpec {
  uint64_t params = 1'000'000'000;  // model size, parameters
  uint32_t workers = 16;            // worker nodes: one payload per shard per step each
  uint32_t gpus_per_node = 1;       // devices per worker node, reduced inside the node first
  uint32_t shards = 4;              // parameter servers, one shard each
  uint32_t shard_align = 4096;      // shard boundaries' multiple (loco-coordinator --shard-align)
  uint32_t batch_per_gpu = 32;      // samples per device per step
  // One device's forward and backward, seconds; 0 = the calibration's
  // estimate for a CPU worker (per parameter-sample and per element).
  double compute_s = 0;
  double worker_link_gbps = 10;  // each worker node's link, each direction
  double server_link_gbps = 10;  // each server's link, each direction
  double intra_node_gbps = 1000;  // the devices' reduce-scatter/all-gather inside a node
  WireEncoding push;  // gradients, worker -> server
  // Parameters, server -> worker: kBlockQuant is the LoCo delta return,
  // with a full fp32 copy every full_sync_every steps (0 = never).
  WireEncoding pull{WireCodec::kBlockQuant, 8, 128};
  uint64_t full_sync_every = 50;
  uint32_t worker_cores = 8;
  uint32_t server_cores = 4;
  // Threads of a server's update (loco-server --apply-threads, at most
  // kMaxApplyThreads); 0 = its default, the server's cores (the host's with
  // shared_cores), at most 4.
  uint32_t apply_threads = 0;
  uint32_t shared_cores = 0;
};

// Every field in range, the encodings valid, enough aligned blocks for the
// shards, and one device per node when the processes share a host. The
// message names the flag of loco-plan that sets the field.
Status ValidateClusterSpec(const ClusterSpec& spec);

}  // namespace loco::plan

// WorkerOptions: every setting of a loco::Worker, passed by value (no
// globals), so that tests can run several workers in one process.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "client/push_codec.h"
#include "common/status.h"
#include "common/transport_security_options.h"

namespace prometheus {
class Registry;
}

namespace loco {

struct WorkerOptions {
  std::string coordinator;  // host:port of the coordinator
  std::string name;         // free text for logs and the coordinator's view

  // Push encoding (client/push_codec.h): naive/ef/loco send
  // CODEC_BLOCK_QUANT payloads compressed with cpu::LocoCompress in mode
  // kNaive / kEf / kLoco.
  PushCodec codec = PushCodec::kLoco;
  // The block codecs' code width (2, 4 or 8) and elements per block (a
  // multiple of 32 in [32, 4096]). fp32 and bf16 ignore both, and
  // ValidateWorkerOptions checks them for the block codecs only.
  int bits = 4;
  int block_size = 256;
  // LoCo's weight on the old error and its reset period T_c (0 = never).
  // Chosen by bench/convergence (bench/README.md, "Convergence"): β in
  // {0, 0.5, 0.8, 0.9}, T_c in {0, 64} and B in {64, 128, 256} all landed
  // within the seed-to-seed spread of fp32, so the defaults are the simplest
  // of the tied settings: β kept at 0.5, no reset. B = 256 is the tied block
  // that keeps the pushed bytes within 0.13x fp32 (4-bit codes are 0.125x,
  // one fp32 scale per block adds 1/B); on the demo MLP it matched B = 128
  // with two seeds.
  float beta = 0.5f;
  int64_t reset_period = 0;
  bool stochastic_rounding = false;
  uint64_t seed = 0;  // stochastic rounding only (mixed with worker id and step)
  int error_bits = 8;  // 8: int8 error state (LoCo); 32: fp32 error state

  // Where the gradients given to Worker::Step live: -1, host memory; d >= 0,
  // the memory of CUDA device d (a model computing there): each shard's
  // slice is then compressed on the device (client/device_gradient_encoder.h)
  // and only its payload crosses to the host. Parameters stay on the host.
  int gradient_device = -1;

  // Deadline of one unary RPC (Join, Push, Heartbeat, Leave...). InitShard,
  // whose request is a full fp32 copy of a shard, has InitShardTimeout.
  int rpc_timeout_ms = 10000;
  // How long one Pull asks the server to wait for the next version; the
  // Pull's own deadline is pull_wait_ms + rpc_timeout_ms.
  int pull_wait_ms = 30000;
  // Upper bound on the time one Step (or InitParameters) spends waiting for
  // the shards to reach a version, across repeated pulls.
  int step_timeout_ms = 300000;
  // Upper bound on the time Join waits for the cluster view to become ready.
  int join_timeout_ms = 60000;

  // Retries of a call refused with UNAVAILABLE: exponential backoff from
  // initial_backoff_ms, doubling, capped at max_backoff_ms, with full jitter;
  // at most max_retries retries and retry_budget_ms of backoff per call.
  int max_retries = 8;
  int initial_backoff_ms = 50;
  int max_backoff_ms = 2000;
  int retry_budget_ms = 30000;
  // How long calls to the coordinator (Join) keep retrying while it is
  // unreachable, in place of max_retries and retry_budget_ms: long enough
  // for a coordinator pod to be restarted on another node. A restart pauses
  // training; it should not end a worker that is joining.
  int coordinator_outage_ms = 300000;

  // gRPC send/receive limit; must hold a full fp32 copy of the largest shard.
  size_t max_message_bytes = size_t{512} << 20;
  // Pushes go as ParameterServer.PushStream in chunks of at most this many
  // bytes of gradient data, so that a server holds one chunk per push in
  // its transport instead of the whole push beside its parsed copy (about
  // 0.5 bytes per shard element per worker at 4 bits). 0: one unary Push.
  // 0 or in [4 KiB, 64 MiB].
  size_t push_chunk_bytes = size_t{256} << 10;
  // With a gradient computed inside Step (the overlapped form) and chunks
  // (push_chunk_bytes > 0): each part of a shard goes out as soon as the
  // backward pass has made it final (a placed PushStream, the end of the
  // shard first), instead of the whole shard once all of it is final. The
  // server receives the same request. Host gradients only: a device
  // gradient's encoder encodes whole shards.
  bool push_parts = true;
  // Each step's pull is a PullStream opened before the push: the server then
  // sends each part of the updated shard's delta as soon as its step has
  // made it final, so the answer crosses the link while the server
  // computes the rest. false = one unary Pull once the push is answered.
  // The parameters are the same either way.
  bool pull_parts = true;
  // One shard's push at a time, the last shard first (client/uplink_turns.h):
  // its server steps and its answer comes down while the earlier shards
  // still go up. false = every shard's push at once, sharing the uplink.
  bool ordered_pushes = true;

  // Where the Worker registers its metrics (client/worker_metrics.h); shared
  // so that the training loop can add its own and serve them together. Null:
  // the Worker keeps a private registry (see Worker::metrics_registry()).
  std::shared_ptr<prometheus::Registry> metrics_registry;

  // How the channels to the coordinator and the servers are secured. The
  // default is neither TLS nor plaintext, which Connect refuses: plaintext
  // must be asked for (TransportSecurityOptions::Insecure()).
  TransportSecurityOptions security;
};

// Checks every field; the message names the field, the bad value and what
// would be valid.
Status ValidateWorkerOptions(const WorkerOptions& o);

// The deadline of one InitShard. Its request is a full fp32 copy of the
// shard, 4 bytes per element (294 MB for two shards of a 73.6M model, 4 GB
// for a 1B-parameter shard), and W workers may offer theirs at once: it is
// bounded like a step (step_timeout_ms), never less than rpc_timeout_ms,
// rather than like a small RPC.
std::chrono::milliseconds InitShardTimeout(const WorkerOptions& o);

}  // namespace loco

// The planner's cost model: one synchronous step as four phases in a row,
// each as long as the busiest resource it uses, plus a fixed overhead.
//
//   compute  each worker node's forward and backward (and the reduction
//            across its devices), then its compression
//   push     the gradients' payloads: the worker's link out, each server's
//            link in, and the CPU both ends spend per byte and per message
//   update   each server decodes its W payloads into the average and runs
//            AdamW and the return encoding on its shard
//   pull     the updated parameters back: each server's link out, the
//            worker's link in, the CPU per byte and per message
//
// Wire bytes are exact (plan/payload_size.h over the coordinator's shard
// map); times come from the Calibration's constants. A server's CPU in the
// push, update and pull phases is the server CPU model's (ServerCpuSeconds,
// split by direction) when the processes have cores of their own, so that
// the phases bound by it spend exactly Prediction::server_cpu_s; on one
// shared host it is the step model's (StepModelServerCpuSeconds), whose
// constants were fitted to that host's step times. Assumptions, stated
// because they bound what a prediction means: the network has full
// bisection and no incast loss (a server's link is shared fairly by its W
// workers); phases do not overlap (the worker's overlap of pushes with the
// backward pass is in the calibrated constants, not modelled); every
// worker is as fast as every other; the periodic full fp32 copy of the
// delta return is amortised into bytes, not into the median step.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "plan/calibration.h"
#include "plan/cluster_spec.h"

namespace loco::plan {

// What bounds a phase, or the step.
enum class Resource {
  kWorkerCompute,  // the devices' (or the CPU worker's) forward and backward
  kWorkerLink,
  kServerLink,
  kWorkerCpu,  // the worker's CPU moving bytes and messages
  kServerCpu,  // the server's CPU: moving bytes, decoding, AdamW
  kHostCpu,    // shared_cores > 0: every process's CPU on the one host
};
const char* ResourceName(Resource resource);

struct Phase {
  double seconds = 0;
  Resource bound = Resource::kWorkerCompute;
};

struct Prediction {
  uint32_t shards = 0;
  uint64_t largest_shard = 0;  // elements
  Phase compute, push, update, pull;
  double overhead_s = 0;
  double step_s = 0;
  // The resource whose phases take the most of the step.
  Resource bound = Resource::kWorkerCompute;
  // Payload bytes (data + scales, no framing) of one step.
  uint64_t push_bytes_per_worker = 0;
  uint64_t pull_bytes_per_worker = 0;  // a step without a full copy
  // Averaged over the full-copy period (equal to the above without one).
  double pull_bytes_per_worker_average = 0;
  uint64_t push_bytes_per_server = 0;  // the largest shard's, all workers' pushes in
  uint64_t pull_bytes_per_server = 0;  // the largest shard's, all workers' pulls out
  // The largest shard's server: CPU seconds per step (bytes, messages,
  // decode, update), the cores that keeps busy on average, and its
  // resident memory.
  double server_cpu_s = 0;
  double server_cores_busy = 0;
  double server_memory_bytes = 0;
};

// The threads that run the largest shard's update at once: the apply
// threads (ClusterSpec::apply_threads, or loco-server's default of at most
// 4), no more than the server's cores (the host's with shared_cores).
uint32_t UpdateThreads(const ClusterSpec& spec);

// Predicts one step of `spec`. InvalidArgument when the spec is invalid
// (ValidateClusterSpec).
StatusOr<Prediction> Predict(const ClusterSpec& spec, const Calibration& calibration);

// The quantities the server CPU model (Calibration::server_cpu_s_*) puts
// a constant on, for the largest shard's server of a prediction.
struct ServerCpuTerms {
  double bytes = 0;             // payload bytes in (pushes) and out (pulls)
  double fp32_bytes = 0;        // of those, the ones that travel as plain fp32
  double stream_s = 0;          // those bytes over one worker link's rate
  double messages = 0;          // a push and a pull per worker
  double payload_elements = 0;  // shard elements x workers (decoded)
  double elements = 0;          // shard elements (the update)
};
ServerCpuTerms ServerCpuTermsOf(const ClusterSpec& spec, const Prediction& p);
// The server CPU model: each term times its constant; with
// calibration.server_cpu_runs = 0 (not fitted), StepModelServerCpuSeconds.
double ServerCpuSeconds(const ServerCpuTerms& terms, const Calibration& calibration);
// The same terms at the step model's constants (cpu_s_per_byte,
// cpu_s_per_message, server_s_per_element*; nothing per fp32 byte or per
// stream second): what a server's phases spend when every process shares
// one host (ClusterSpec::shared_cores > 0).
double StepModelServerCpuSeconds(const ServerCpuTerms& terms, const Calibration& calibration);

}  // namespace loco::plan

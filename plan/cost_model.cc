#include "plan/cost_model.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <vector>

#include "common/shard_layout.h"

namespace loco::plan {
namespace {

// loco-server --apply-threads=0 (its default): the CPUs it may run on, at
// most this many.
constexpr uint32_t kDefaultApplyThreadCap = 4;

// The shard map's payload sizes for one step.
struct StepBytes {
  uint64_t largest_shard = 0;
  uint64_t push_per_worker = 0, pull_per_worker = 0;
  uint64_t push_per_server = 0, pull_per_server = 0;
};

StatusOr<StepBytes> ComputeStepBytes(const ClusterSpec& spec) {
  StatusOr<std::vector<ShardRange>> map =
      MakeShardMap(spec.params, spec.shards, spec.shard_align);
  if (!map.ok()) return map.status();
  StepBytes b;
  for (const ShardRange& shard : *map) {
    b.largest_shard = std::max(b.largest_shard, shard.length);
    b.push_per_worker += PayloadBytes(spec.push, shard.length);
    b.pull_per_worker += PayloadBytes(spec.pull, shard.length);
  }
  b.push_per_server = uint64_t{spec.workers} * PayloadBytes(spec.push, b.largest_shard);
  b.pull_per_server = uint64_t{spec.workers} * PayloadBytes(spec.pull, b.largest_shard);
  return b;
}

double LinkSeconds(double bytes, double gbps, const Calibration& c) {
  return bytes * 8.0 / (gbps * 1e9 * c.link_efficiency);
}

// The longest of several candidate bounds (the first wins a tie).
Phase Longest(std::initializer_list<Phase> candidates) {
  Phase best = *candidates.begin();
  for (const Phase& p : candidates) {
    if (p.seconds > best.seconds) best = p;
  }
  return best;
}

// One worker node's forward and backward on each device, the reduction
// across its devices, and its compression and apply of the return (each
// device handles 1/G of the parameters).
Phase ComputePhase(const ClusterSpec& spec, const Calibration& c) {
  const double n = static_cast<double>(spec.params);
  const double g = spec.gpus_per_node;
  const double forward_backward = spec.compute_s > 0
                                      ? spec.compute_s
                                      : c.worker_s_per_param_sample * n * spec.batch_per_gpu;
  const double intra_node =
      spec.gpus_per_node > 1 ? 2.0 * (g - 1) / g * 4.0 * n * 8.0 / (spec.intra_node_gbps * 1e9)
                             : 0.0;
  const double worker = forward_backward + intra_node + c.worker_s_per_element * n / g;
  if (spec.shared_cores == 0) return {worker, Resource::kWorkerCompute};
  return Longest({{worker, Resource::kWorkerCompute},
                  {spec.workers * worker / spec.shared_cores, Resource::kHostCpu}});
}

// The server CPU model's terms for one direction of the step's traffic:
// `server_bytes` through the largest shard's server, a message per worker.
ServerCpuTerms TransferTerms(const ClusterSpec& spec, const WireEncoding& encoding,
                             double server_bytes) {
  ServerCpuTerms t;
  t.bytes = server_bytes;
  if (encoding.codec == WireCodec::kFp32) t.fp32_bytes = server_bytes;
  t.stream_s = server_bytes * 8.0 / (spec.worker_link_gbps * 1e9);
  t.messages = spec.workers;
  return t;
}

// The server CPU model's terms for the update of a shard of `shard` elements.
ServerCpuTerms UpdateTerms(const ClusterSpec& spec, uint64_t shard) {
  ServerCpuTerms t;
  t.elements = static_cast<double>(shard);
  t.payload_elements = t.elements * spec.workers;
  return t;
}

// The server CPU a phase spends on `terms`. Every process on one host
// (shared_cores > 0, as bench/e2e runs): the step model's constants, fitted
// to step times on that host, which absorb how its processes' CPU overlaps
// (the server CPU model there predicts the CPU well and the step worse:
// bench/plan/README.md). Dedicated cores: the server CPU model, so that the
// phases bound by the server's CPU spend exactly Prediction::server_cpu_s
// and the server is never predicted busier than its cores.
double PhaseServerCpuSeconds(const ClusterSpec& spec, const ServerCpuTerms& terms,
                             const Calibration& c) {
  return spec.shared_cores > 0 ? StepModelServerCpuSeconds(terms, c)
                               : ServerCpuSeconds(terms, c);
}

// One direction of the step's traffic: `worker_bytes` through each worker's
// link, `server_bytes` through the largest shard's server link, and the CPU
// both ends spend on them.
Phase TransferPhase(const ClusterSpec& spec, const Calibration& c, const WireEncoding& encoding,
                    double worker_bytes, double server_bytes) {
  const Phase worker_link{LinkSeconds(worker_bytes, spec.worker_link_gbps, c),
                          Resource::kWorkerLink};
  const Phase server_link{LinkSeconds(server_bytes, spec.server_link_gbps, c),
                          Resource::kServerLink};
  const double worker_cpu = c.cpu_s_per_byte * worker_bytes + c.cpu_s_per_message * spec.shards;
  const double server_cpu =
      PhaseServerCpuSeconds(spec, TransferTerms(spec, encoding, server_bytes), c);
  if (spec.shared_cores > 0) {
    const double host = (spec.workers * worker_cpu + spec.shards * server_cpu) / spec.shared_cores;
    return Longest({worker_link, server_link, {host, Resource::kHostCpu}});
  }
  // A worker's streams to its S servers, and a server's from its W workers,
  // run in parallel on as many cores as there are streams.
  return Longest({worker_link, server_link,
                  {worker_cpu / std::min(spec.worker_cores, spec.shards), Resource::kWorkerCpu},
                  {server_cpu / std::min(spec.server_cores, spec.workers), Resource::kServerCpu}});
}

// The largest shard's step on its server's apply threads.
Phase UpdatePhase(const ClusterSpec& spec, const Calibration& c, uint64_t shard) {
  const double cpu = PhaseServerCpuSeconds(spec, UpdateTerms(spec, shard), c);
  const Phase server{cpu / UpdateThreads(spec), Resource::kServerCpu};
  if (spec.shared_cores == 0) return server;
  return Longest({server, {spec.shards * cpu / spec.shared_cores, Resource::kHostCpu}});
}

// The resource with the most seconds over the phases.
Resource BoundingResource(const Prediction& p) {
  std::array<double, 6> by_resource{};
  for (const Phase* phase : {&p.compute, &p.push, &p.update, &p.pull}) {
    by_resource[static_cast<size_t>(phase->bound)] += phase->seconds;
  }
  return static_cast<Resource>(std::max_element(by_resource.begin(), by_resource.end()) -
                               by_resource.begin());
}

}  // namespace

uint32_t UpdateThreads(const ClusterSpec& spec) {
  const uint32_t cores = spec.shared_cores > 0 ? spec.shared_cores : spec.server_cores;
  // More threads than cores take turns on them.
  return std::min(cores, spec.apply_threads > 0 ? spec.apply_threads : kDefaultApplyThreadCap);
}

const char* ResourceName(Resource resource) {
  switch (resource) {
    case Resource::kWorkerCompute: return "worker compute";
    case Resource::kWorkerLink: return "worker link";
    case Resource::kServerLink: return "server link";
    case Resource::kWorkerCpu: return "worker CPU (network)";
    case Resource::kServerCpu: return "server CPU";
    case Resource::kHostCpu: return "host CPU (shared cores)";
  }
  return "unknown";
}

ServerCpuTerms ServerCpuTermsOf(const ClusterSpec& spec, const Prediction& p) {
  const ServerCpuTerms push =
      TransferTerms(spec, spec.push, static_cast<double>(p.push_bytes_per_server));
  const ServerCpuTerms pull =
      TransferTerms(spec, spec.pull, static_cast<double>(p.pull_bytes_per_server));
  const ServerCpuTerms update = UpdateTerms(spec, p.largest_shard);
  ServerCpuTerms t;
  t.bytes = push.bytes + pull.bytes;
  t.fp32_bytes = push.fp32_bytes + pull.fp32_bytes;
  t.stream_s = push.stream_s + pull.stream_s;
  t.messages = push.messages + pull.messages;
  t.payload_elements = update.payload_elements;
  t.elements = update.elements;
  return t;
}

double StepModelServerCpuSeconds(const ServerCpuTerms& t, const Calibration& c) {
  return c.cpu_s_per_byte * t.bytes + c.cpu_s_per_message * t.messages +
         c.server_s_per_element_payload * t.payload_elements +
         c.server_s_per_element * t.elements;
}

double ServerCpuSeconds(const ServerCpuTerms& t, const Calibration& c) {
  if (c.server_cpu_runs == 0) return StepModelServerCpuSeconds(t, c);
  return c.server_cpu_s_per_byte * t.bytes + c.server_cpu_s_per_fp32_byte * t.fp32_bytes +
         c.server_cpu_s_per_stream_s * t.stream_s +
         c.server_cpu_s_per_message * t.messages +
         c.server_cpu_s_per_element_payload * t.payload_elements +
         c.server_cpu_s_per_element * t.elements;
}

StatusOr<Prediction> Predict(const ClusterSpec& spec, const Calibration& c) {
  LOCO_RETURN_IF_ERROR(ValidateClusterSpec(spec));
  StatusOr<StepBytes> bytes = ComputeStepBytes(spec);
  if (!bytes.ok()) return bytes.status();
  Prediction p;
  p.shards = spec.shards;
  p.largest_shard = bytes->largest_shard;
  p.push_bytes_per_worker = bytes->push_per_worker;
  p.pull_bytes_per_worker = bytes->pull_per_worker;
  p.push_bytes_per_server = bytes->push_per_server;
  p.pull_bytes_per_server = bytes->pull_per_server;
  p.pull_bytes_per_worker_average = static_cast<double>(bytes->pull_per_worker);
  const bool delta = spec.pull.codec == WireCodec::kBlockQuant;
  if (delta && spec.full_sync_every > 0) {
    const double full = 4.0 * static_cast<double>(spec.params);
    p.pull_bytes_per_worker_average +=
        (full - static_cast<double>(bytes->pull_per_worker)) / spec.full_sync_every;
  }

  p.compute = ComputePhase(spec, c);
  p.push = TransferPhase(spec, c, spec.push, bytes->push_per_worker, bytes->push_per_server);
  p.update = UpdatePhase(spec, c, bytes->largest_shard);
  p.pull = TransferPhase(spec, c, spec.pull, bytes->pull_per_worker, bytes->pull_per_server);
  p.overhead_s = c.step_overhead_s;
  p.step_s = p.compute.seconds + p.push.seconds + p.update.seconds + p.pull.seconds +
             p.overhead_s;
  p.bound = BoundingResource(p);

  p.server_cpu_s = ServerCpuSeconds(ServerCpuTermsOf(spec, p), c);
  p.server_cores_busy = p.step_s > 0 ? p.server_cpu_s / p.step_s : 0;
  const double shard = static_cast<double>(bytes->largest_shard);
  p.server_memory_bytes = c.server_fixed_bytes + c.server_bytes_per_element * shard +
                          (delta ? c.server_delta_bytes_per_element * shard : 0.0) +
                          c.server_push_held_fraction *
                              static_cast<double>(bytes->push_per_server) +
                          static_cast<double>(bytes->pull_per_server) / spec.workers;
  return p;
}

}  // namespace loco::plan

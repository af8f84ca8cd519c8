#include "plan/cluster_spec.h"

#include <cmath>
#include <string>

#include "common/format_double.h"

namespace loco::plan {
namespace {

Status PositiveRate(double gbps, const char* flag) {
  if (!(std::isfinite(gbps) && gbps > 0)) {
    return InvalidArgument(std::string("--") + flag + " " + FormatDouble(gbps) +
                           " is not a rate > 0 Gbit/s");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateClusterSpec(const ClusterSpec& spec) {
  if (spec.params == 0) return InvalidArgument("--params must be >= 1");
  if (spec.workers == 0) return InvalidArgument("--workers must be >= 1");
  if (spec.gpus_per_node == 0) return InvalidArgument("--gpus-per-node must be >= 1");
  if (spec.shards == 0) return InvalidArgument("--shards must be >= 1");
  if (spec.batch_per_gpu == 0) return InvalidArgument("--batch-per-gpu must be >= 1");
  if (spec.shard_align == 0 || spec.shard_align % 32 != 0) {
    return InvalidArgument("--shard-align " + std::to_string(spec.shard_align) +
                           " is not a positive multiple of 32");
  }
  const uint64_t blocks = (spec.params + spec.shard_align - 1) / spec.shard_align;
  if (blocks < spec.shards) {
    return InvalidArgument("--shards " + std::to_string(spec.shards) + " exceeds the " +
                           std::to_string(blocks) + " aligned blocks of " +
                           std::to_string(spec.shard_align) + " elements in " +
                           std::to_string(spec.params) + " parameters");
  }
  if (!(std::isfinite(spec.compute_s) && spec.compute_s >= 0)) {
    return InvalidArgument("--compute-ms must be a finite time >= 0 (0 = estimate)");
  }
  LOCO_RETURN_IF_ERROR(PositiveRate(spec.worker_link_gbps, "link-gbps"));
  LOCO_RETURN_IF_ERROR(PositiveRate(spec.server_link_gbps, "server-link-gbps"));
  LOCO_RETURN_IF_ERROR(PositiveRate(spec.intra_node_gbps, "intra-node-gbps"));
  LOCO_RETURN_IF_ERROR(ValidateEncoding(spec.push, "--bits/--block"));
  LOCO_RETURN_IF_ERROR(ValidateEncoding(spec.pull, "--pull-bits/--pull-block"));
  if (spec.worker_cores == 0 || spec.server_cores == 0) {
    return InvalidArgument("--worker-cores and --server-cores must be >= 1");
  }
  if (spec.apply_threads > kMaxApplyThreads) {
    return InvalidArgument("--apply-threads " + std::to_string(spec.apply_threads) +
                           " is more than loco-server's " + std::to_string(kMaxApplyThreads));
  }
  if (spec.shared_cores > 0 && spec.gpus_per_node != 1) {
    return InvalidArgument("--shared-cores describes CPU processes on one host; it needs "
                           "--gpus-per-node 1, got " + std::to_string(spec.gpus_per_node));
  }
  return Status::Ok();
}

}  // namespace loco::plan

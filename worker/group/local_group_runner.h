// LocalGroupRunner: one node's synchronous training step over a LocalGroup of
// N local ranks (devices) and ONE loco::Worker:
//
//   1. every local rank computes its gradient at its replica of the
//      parameters (one thread per rank, concurrently);
//   2. ReduceScatterMean: rank r writes slice r of the mean gradient into
//      the node buffer (full precision, never compressed);
//   3. the Worker steps on the node buffer: per shard, one LoCo payload
//      pushed and the new shard pulled, every shard from its own thread
//      (Worker::Step), so only one payload per shard leaves the node;
//   4. AllGather: every replica receives the new parameters, rank r
//      contributing its slice of the Worker's copy.
//
// Why the network step is one Worker::Step on the reduced gradient rather
// than each local rank pushing and pulling its own shards: Worker::Step
// already pushes and pulls every shard concurrently, and it holds the
// protocol's step-wide decisions (a refused push or disagreeing shard
// versions resynchronise ALL shards; expiry; the error state advancing only
// for accepted pushes). Splitting it by rank would duplicate or fork that
// logic. The slices still follow the shard map (SlicesForShards), so rank r
// reduces exactly the shards it would push, should a device-side encoder
// later encode its own shards.
//
// Not thread-safe: one training thread calls every method; the runner
// starts and joins the ranks' threads inside each call. `group` and `worker`
// must outlive the runner.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "common/status.h"
#include "worker/group/local_group.h"
#include "client/worker.h"
#include "client/worker_stats.h"

namespace loco {

class LocalGroupRunner {
 public:
  // Rank `rank`'s gradient at `params` (its replica) into *grads (resized to
  // the model size). Runs on rank `rank`'s thread, concurrently with the
  // other ranks: it must only touch that rank's own state.
  using GradientFn =
      std::function<Status(int rank, std::span<const float> params, std::vector<float>* grads)>;

  LocalGroupRunner(LocalGroup* group, Worker* worker);

  // The Worker's copy of the parameters: pass it to Worker::InitParameters
  // or Worker::Rejoin, then call Broadcast.
  std::vector<float>* node_params() { return &node_params_; }
  // Rank `rank`'s replica (what its gradient is computed at).
  const std::vector<float>& replica(int rank) const {
    return replicas_[static_cast<size_t>(rank)];
  }

  // All-gathers node_params() into every replica (after InitParameters or
  // Rejoin). node_params() must have the group's size.
  Status Broadcast();

  // One node step (steps 1-4 above). A failed gradient aborts the group (the
  // group is then unusable and Step returns that failure). When the Worker's
  // step fails, the replicas keep their parameters and the Worker's status is
  // returned (e.g. after expiry: Rejoin into node_params(), then Broadcast).
  StatusOr<StepResult> Step(const GradientFn& gradient);

 private:
  LocalGroup* group_;
  Worker* worker_;
  std::vector<float> node_params_;  // the Worker's copy
  std::vector<float> node_grads_;   // the mean gradient; rank r writes slice r
  std::vector<std::vector<float>> replicas_, grads_;
};

}  // namespace loco

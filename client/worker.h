// loco::Worker: the client side of LoCo-PS, and the one public header of the
// client library. It joins the cluster through the coordinator, uploads or
// fetches the initial parameters, and for every synchronous step compresses
// the gradient per shard range, pushes it to all parameter servers
// concurrently and pulls the updated shards back.
//
// Usage:
//
//   loco::WorkerOptions o;
//   o.coordinator = "127.0.0.1:7000";
//   o.codec = loco::PushCodec::kLoco;       // 4-bit LoCo
//   auto w = loco::Worker::Connect(o);      // validates options
//   if (!w.ok()) ...;
//   LOCO_RETURN_IF_ERROR((*w)->Join(model.size()));
//   std::vector<float> params(model.size());  // or any float buffer of that size
//   LOCO_RETURN_IF_ERROR((*w)->InitParameters(initial, params));
//   while ((*w)->step() < total_steps) {
//     compute grads at params ...;
//     auto r = (*w)->Step(grads, params);  // params now hold the new version
//     if (!r.ok()) ...;
//   }
//   LOCO_RETURN_IF_ERROR((*w)->Leave());
//
// Parameters live in the caller's memory: the span overloads write the
// shards' answers straight into it (a Python binding hands in the flat
// float32 buffer of its tensors); the std::vector<float>* overloads are thin
// forwards to them.
//
// Protocol (proto/loco.proto, DESIGN §3): the worker holding version t pushes
// its gradient as step t to every shard, then pulls version t + 1. A push
// refused with FAILED_PRECONDITION (step already applied, step ahead of the
// server, worker not a participant of the open step) makes the worker drop
// the gradient and resynchronise: it pulls full fp32 copies, waiting for the
// next version when the open step excludes it, and adopts the shards'
// common version. The same happens when shards disagree on the version after
// a step. A shard's LoCo error state keeps the compensation of a push only
// when that shard accepted it; otherwise it restarts from zero.
//
// Overlap: Step(compute, grads, params) runs the gradient computation on the
// calling thread and pushes each part of a shard as soon as it is final
// (GradientReady; a placed PushStream with options.push_parts, else the
// whole shard once all of it is final), so that compression and pushes
// overlap the rest of the backward pass.
//
// Failure model: calls refused with UNAVAILABLE are retried with capped,
// jittered exponential backoff (WorkerOptions); every wait is bounded
// (rpc_timeout_ms, pull_wait_ms, step_timeout_ms, join_timeout_ms). Within a
// Step, pushes and pulls keep retrying while a server is away, up to
// step_timeout_ms; when a pull found the server away, the same push is sent
// again (the server may have restarted from a checkpoint without it). A
// restarted server that is behind adopts the step of the first push ahead of
// it (ShardService::RestoreFrom), so the cluster converges to the workers'
// step. When the coordinator answers a heartbeat with NOT_FOUND the worker is
// marked expired and Step returns FAILED_PRECONDITION: call Rejoin (or build
// a new Worker and join again). A step that fails in a way a stall explains
// (DEADLINE_EXCEEDED, UNAVAILABLE, FAILED_PRECONDITION, NOT_FOUND, ABORTED)
// first asks the coordinator with one heartbeat, so that a process stopped
// past the heartbeat timeout (SIGSTOP, swap) learns of its expiry from the
// failed step itself, whichever thread would have noticed first.
//
// Thread safety: WaitForClusterStep, Join, InitParameters, Rejoin, Step and
// Leave must be called from one thread at a time (the training loop).
// step(), rank(), world_size(), worker_id(), expired(), traffic() and
// LeaveNow() may be called from any thread.
//
// Why an abstract class with a factory (leveldb's DB / DBImpl) rather than a
// pimpl: Connect already hands out a std::unique_ptr<Worker>, so callers
// see no change; the implementation (client/worker_impl.h, with gRPC, the
// protobuf messages and the per-shard state) stays out of every includer;
// no method needs a hand-written forward; and the code that drives a Worker
// (a training loop, a local group, a binding) can be tested against a fake
// one. A virtual call per method costs nothing beside an RPC.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "client/step_hyper.h"
#include "client/worker_options.h"
#include "client/worker_stats.h"
#include "common/gradient_ready.h"
#include "common/status.h"

namespace prometheus {
class Registry;
}

namespace loco {

class Worker {
 public:
  // Validates `options` and opens a (lazy) channel to the coordinator.
  [[nodiscard]] static StatusOr<std::unique_ptr<Worker>> Connect(const WorkerOptions& options);
  // Leaves the cluster (bounded: one attempt per RPC deadline) if still joined.
  virtual ~Worker() = default;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Waits, polling every `poll`, until the cluster's global step (shard 0's
  // version; client/cluster_progress.h) is >= `step`, and returns the step
  // seen, which may be past `step`. Meant for before Join, so that a late
  // joiner joins at a chosen step: it changes no state here or in the
  // cluster. DeadlineExceeded at `deadline`; RPC errors after the retries;
  // ABORTED when the interrupt check (SetInterruptCheck) says so, asked
  // after each poll.
  [[nodiscard]] virtual StatusOr<uint64_t> WaitForClusterStep(
      uint64_t step, std::chrono::steady_clock::time_point deadline,
      std::chrono::milliseconds poll) = 0;
  // The same, polling every 10 ms.
  [[nodiscard]] StatusOr<uint64_t> WaitForClusterStep(
      uint64_t step, std::chrono::steady_clock::time_point deadline) {
    return WaitForClusterStep(step, deadline, std::chrono::milliseconds(10));
  }

  // Joins with a model of `num_elements` (the first join fixes the model
  // size; a different size is refused), waits up to join_timeout_ms for the
  // cluster view to be ready, checks the shard map (contiguous, covering,
  // every offset a multiple of block_size for the block codecs, the largest
  // shard fits in max_message_bytes), opens one channel per server and starts
  // the heartbeat thread. FAILED_PRECONDITION when already joined. A join
  // that fails leaves the cluster again, and Join may be called again.
  [[nodiscard]] virtual Status Join(size_t num_elements) = 0;

  // First writer wins: offers `initial` to every shard (ALREADY_EXISTS from a
  // shard that already holds parameters is fine; ranks other than 0 wait
  // for rank 0's copy and offer only once they have become rank 0 (the old
  // one left or expired) or after InitShardTimeout), then pulls a full
  // fp32 copy into `params` and sets step() to the shards' common version
  // (which may be > 0 for a late joiner). initial.size() and params.size()
  // must equal the model size (InvalidArgument otherwise, nothing written);
  // `params` may be the same memory as `initial`, and is the caller's until
  // the next call: Step writes the new versions into it. Its waits (for
  // rank 0's copy, the offer's retries, the pulls) end when the interrupt
  // check (SetInterruptCheck) says so: ABORTED, and it may be called again.
  [[nodiscard]] virtual Status InitParameters(std::span<const float> initial,
                                              std::span<float> params) = 0;
  // The same into a vector, resized to the model size first.
  [[nodiscard]] Status InitParameters(std::span<const float> initial,
                                      std::vector<float>* params) {
    SizeForModel(initial.size(), params);
    return InitParameters(initial, std::span<float>(*params));
  }

  // After expiry (expired() is true: the coordinator removed this worker,
  // e.g. it was stalled past the heartbeat timeout): joins again with the same
  // model size, under a new worker id, with a fresh LoCo error state, and
  // pulls a full fp32 copy into `params`, as InitParameters does; the worker
  // takes part from the next step. FailedPrecondition when not expired;
  // InvalidArgument, before anything else happens, when initial.size() or
  // params.size() is not the model size.
  [[nodiscard]] virtual Status Rejoin(std::span<const float> initial,
                                      std::span<float> params) = 0;
  // The same into a vector, resized to the model size first.
  [[nodiscard]] Status Rejoin(std::span<const float> initial, std::vector<float>* params) {
    SizeForModel(initial.size(), params);
    return Rejoin(initial, std::span<float>(*params));
  }

  // One synchronous step at step(): see the protocol above. grads and
  // params have the model size (InvalidArgument otherwise, nothing
  // written); params must hold the copy InitParameters or the previous Step
  // produced. On OK, params hold the shards' new version, written in place,
  // and step() has advanced (by one, or to the resynchronised version).
  [[nodiscard]] virtual StatusOr<StepResult> Step(std::span<const float> grads,
                                                  std::span<float> params) = 0;
  [[nodiscard]] StatusOr<StepResult> Step(std::span<const float> grads,
                                          std::vector<float>* params) {
    return Step(grads, std::span<float>(*params));
  }

  // The same step, overlapped with the computation of the gradient. `compute`
  // runs on the calling thread and fills `grads` (the model's size, in
  // place), calling `ready` as suffixes of it become final. Each shard is
  // encoded and pushed on a thread of its own: part by part as they become
  // final (options.push_parts), or whole once its range is final; its pull
  // starts once its push is accepted, and writes `params` (which compute
  // reads) only once compute has returned. The result is bit for bit that
  // of computing the gradient first and calling Step(grads, params). A
  // non-OK status from compute fails the step with it; shards already
  // pushed stay pushed, a shard pushed in part is cancelled and the server
  // keeps nothing of it (the caller is expected to stop, as for any
  // gradient that cannot be computed).
  using GradientCompute = std::function<Status(const GradientReady& ready)>;
  [[nodiscard]] virtual StatusOr<StepResult> Step(const GradientCompute& compute,
                                                  std::span<const float> grads,
                                                  std::span<float> params) = 0;
  [[nodiscard]] StatusOr<StepResult> Step(const GradientCompute& compute,
                                          std::span<const float> grads,
                                          std::vector<float>* params) {
    return Step(compute, grads, std::span<float>(*params));
  }

  // AdamW hyper-parameters for the following steps, per range of the flat
  // parameter space (client/step_hyper.h): every push of a later Step
  // carries the groups that meet its shard, and the servers step with them
  // instead of their flags. All workers of a step must send the same values
  // (a trainer's param groups, changed by a schedule at the same step on
  // every worker): the shards refuse a disagreeing push with
  // INVALID_ARGUMENT, which Step returns. An empty `groups` goes back to the
  // servers' flags. Kept across Rejoin. Precondition: joined (the groups must
  // cover [0, num_elements())). On error (FailedPrecondition before Join;
  // InvalidArgument naming the group, or a shard that meets more groups than
  // a push may carry) nothing changes. Same thread as Step.
  [[nodiscard]] virtual Status SetStepHyper(std::span<const HyperGroup> groups) = 0;

  // Stops the heartbeat and sends Leave. Idempotent; OK when not joined or
  // when the coordinator had already expired this worker.
  [[nodiscard]] virtual Status Leave() = 0;
  // Thread-safe, for a signal-handling thread (SIGTERM): tells the coordinator
  // at once that this worker leaves (one attempt, bounded by rpc_timeout_ms),
  // so that the step in progress stops waiting for it. The training thread's
  // calls may still be in flight; the caller ends the process next.
  [[nodiscard]] virtual Status LeaveNow() = 0;
  // Thread-safe: makes a Join running on another thread stop retrying an
  // unreachable coordinator (which it would for coordinator_outage_ms), or
  // waiting for the cluster to be ready (for join_timeout_ms: servers not
  // registered yet), and return ABORTED within about 50 ms plus one RPC in
  // flight, leaving the cluster again; for a trainer that wants Ctrl-C to
  // work (the Python package). A Join that starts later clears it.
  virtual void InterruptJoin() = 0;
  // `check` is called after each poll of WaitForClusterStep, and about
  // every 100 ms by the thread running Step while
  // that thread waits for the shards' pushes and pulls (after the gradient
  // computation returned), for the full pulls of a resynchronisation (in
  // Step, and in InitParameters), and in InitParameters (and Rejoin's) for
  // rank 0's initial parameters and for the offer of its own. When it
  // returns true the call ends at once: its RPCs are cancelled, the retries
  // of a server that is away stop, and it returns ABORTED ("interrupted"),
  // within about 100 ms plus one RPC already in flight. For a trainer that
  // wants Ctrl-C to end a step that waits for a server (the Python package,
  // whose check looks for a signal). Empty (the default): never. Same
  // thread as Step; kept across Rejoin.
  virtual void SetInterruptCheck(std::function<bool()> check) = 0;

  virtual uint64_t step() const = 0;
  virtual uint32_t rank() const = 0;
  virtual uint32_t world_size() const = 0;
  virtual uint64_t worker_id() const = 0;
  virtual bool expired() const = 0;
  // The model size joined with (what params and grads must hold); 0 before
  // the first Join. Same thread as Join.
  virtual size_t num_elements() const = 0;
  // The shard map joined with: {offset, length} per shard, in shard order;
  // empty before Join. Same thread as Join (the training loop).
  virtual std::vector<std::pair<uint64_t, uint64_t>> shard_ranges() const = 0;
  virtual TrafficStats traffic() const = 0;
  // The registry holding this worker's metrics (options.metrics_registry
  // when given); serve it with a MetricsEndpoint.
  virtual const std::shared_ptr<prometheus::Registry>& metrics_registry() const = 0;

 protected:
  Worker() = default;

 private:
  // The vector overloads' one difference: a vector of another size takes the
  // model's, when the call is otherwise valid (`initial` has the model's),
  // so that a call refused for its input leaves the vector as it was.
  void SizeForModel(size_t initial_size, std::vector<float>* params) const {
    if (initial_size != 0 && initial_size == num_elements()) params->resize(initial_size);
  }
};

}  // namespace loco

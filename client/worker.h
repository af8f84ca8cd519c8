// loco::Worker: the client side of LoCo-PS. It joins the cluster through the
// coordinator, uploads or fetches the initial parameters, and for every
// synchronous step compresses the gradient per shard range, pushes it to all
// parameter servers concurrently and pulls the updated shards back.
//
// Usage:
//
//   loco::WorkerOptions o;
//   o.coordinator = "127.0.0.1:7000";
//   o.codec = loco::PushCodec::kLoco;       // 4-bit LoCo
//   auto w = loco::Worker::Connect(o);      // validates options
//   if (!w.ok()) ...;
//   LOCO_RETURN_IF_ERROR((*w)->Join(model.size()));
//   std::vector<float> params;
//   LOCO_RETURN_IF_ERROR((*w)->InitParameters(initial, &params));
//   while ((*w)->step() < total_steps) {
//     compute grads at params ...;
//     auto r = (*w)->Step(grads, &params);  // params now hold the new version
//     if (!r.ok()) ...;
//   }
//   LOCO_RETURN_IF_ERROR((*w)->Leave());
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
// a new Worker and join again).
//
// Thread safety: WaitForClusterStep, Join, InitParameters, Step and Leave
// must be called from one thread at a time (the training loop). step(),
// rank(), world_size(), worker_id(), expired() and traffic() may be called
// from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "common/status.h"
#include "proto/loco.grpc.pb.h"
#include "client/pull_bytes.h"
#include "security/transport_security.h"
#include "client/shard_encoder.h"
#include "client/gradient_progress.h"
#include "common/gradient_ready.h"
#include "client/heartbeat_loop.h"
#include "client/pull_stream_call.h"
#include "client/pulled_parts.h"
#include "client/uplink_turns.h"
#include "client/pulled_response.h"
#include "client/retry_policy.h"
#include "client/worker_metrics.h"
#include "client/worker_options.h"
#include "client/worker_stats.h"

namespace loco {

class Worker {
 public:
  // Validates `options` and opens a (lazy) channel to the coordinator.
  static StatusOr<std::unique_ptr<Worker>> Connect(const WorkerOptions& options);
  // Leaves the cluster (bounded: one attempt per RPC deadline) if still joined.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Waits, polling every `poll`, until the cluster's global step (shard 0's
  // version; client/cluster_progress.h) is >= `step`, and returns the step
  // seen, which may be past `step`. Meant for before Join, so that a late
  // joiner joins at a chosen step: it changes no state here or in the
  // cluster. DeadlineExceeded at `deadline`; RPC errors after the retries.
  StatusOr<uint64_t> WaitForClusterStep(
      uint64_t step, std::chrono::steady_clock::time_point deadline,
      std::chrono::milliseconds poll = std::chrono::milliseconds(10));

  // Joins with a model of `num_elements` (the first join fixes the model
  // size; a different size is refused), waits up to join_timeout_ms for the
  // cluster view to be ready, checks the shard map (contiguous, covering,
  // every offset a multiple of block_size for the block codecs, the largest
  // shard fits in max_message_bytes), opens one channel per server and starts
  // the heartbeat thread. FAILED_PRECONDITION when already joined. A join
  // that fails leaves the cluster again, and Join may be called again.
  Status Join(size_t num_elements);

  // First writer wins: offers `initial` to every shard (ALREADY_EXISTS from a
  // shard that already holds parameters is fine; ranks other than 0 offer
  // only when the shards are still empty after up to 5 s), then pulls a full fp32
  // copy into *params and sets step() to the shards' common version (which
  // may be > 0 for a late joiner). initial.size() must equal the model size.
  Status InitParameters(std::span<const float> initial, std::vector<float>* params);

  // After expiry (expired() is true: the coordinator removed this worker,
  // e.g. it was stalled past the heartbeat timeout): joins again with the same
  // model size, under a new worker id, with a fresh LoCo error state, and
  // pulls a full fp32 copy into *params, as InitParameters does; the worker
  // takes part from the next step. FailedPrecondition when not expired.
  Status Rejoin(std::span<const float> initial, std::vector<float>* params);

  // One synchronous step at step(): see the protocol above. grads and
  // *params have the model size; *params must be the copy InitParameters or
  // the previous Step produced. On OK, *params holds the shards' new version
  // and step() has advanced (by one, or to the resynchronised version).
  StatusOr<StepResult> Step(std::span<const float> grads, std::vector<float>* params);

  // The same step, overlapped with the computation of the gradient. `compute`
  // runs on the calling thread and fills `grads` (the model's size, in
  // place), calling `ready` as suffixes of it become final. Each shard is
  // encoded and pushed on a thread of its own: part by part as they become
  // final (options.push_parts), or whole once its range is final; its pull
  // starts once its push is accepted, and writes *params (which compute
  // reads) only once compute has returned. The result is bit for bit that
  // of computing the gradient first and calling Step(grads, params). A
  // non-OK status from compute fails the step with it; shards already
  // pushed stay pushed, a shard pushed in part is cancelled and the server
  // keeps nothing of it (the caller is expected to stop, as for any
  // gradient that cannot be computed).
  using GradientCompute = std::function<Status(const GradientReady& ready)>;
  StatusOr<StepResult> Step(const GradientCompute& compute, std::span<const float> grads,
                            std::vector<float>* params);

  // Stops the heartbeat and sends Leave. Idempotent; OK when not joined or
  // when the coordinator had already expired this worker.
  Status Leave();
  // Thread-safe, for a signal-handling thread (SIGTERM): tells the coordinator
  // at once that this worker leaves (one attempt, bounded by rpc_timeout_ms),
  // so that the step in progress stops waiting for it. The training thread's
  // calls may still be in flight; the caller ends the process next.
  Status LeaveNow();

  uint64_t step() const { return step_.load(); }
  uint32_t rank() const { return rank_.load(); }
  uint32_t world_size() const { return world_size_.load(); }
  uint64_t worker_id() const { return worker_id_.load(); }
  bool expired() const { return expired_.load(); }
  // The shard map joined with: {offset, length} per shard, in shard order;
  // empty before Join. Same thread as Join (the training loop).
  std::vector<std::pair<uint64_t, uint64_t>> shard_ranges() const {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (const Shard& s : shards_) out.emplace_back(s.offset, s.length);
    return out;
  }
  TrafficStats traffic() const;
  // The registry holding this worker's metrics (options.metrics_registry
  // when given); serve it with a MetricsEndpoint.
  const std::shared_ptr<prometheus::Registry>& metrics_registry() const { return registry_; }

 private:
  struct Shard {
    uint32_t id = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
    std::string address;
    std::shared_ptr<grpc::Channel> channel;  // to the shard's server
    std::unique_ptr<v1::ParameterServer::Stub> stub;
    std::unique_ptr<PullBytesClient> puller;  // Pull, answers left in gRPC's buffer
    std::unique_ptr<ShardEncoder> encoder;
    uint64_t version = 0;  // version held in the worker's copy
    bool have = false;     // whether the worker's copy holds any version
    // Kept across steps: encoding reuses the push's payload buffer instead
    // of allocating (and faulting in) a shard-sized message every step, and
    // the pull's reader its scale buffer. Used only by the thread that
    // handles this shard in a Step, Resync or InitParameters.
    v1::PushRequest push;
    PulledResponse pulled;
    PulledParts parts;  // a PullStream's answer
  };
  struct PullOutcome {
    uint64_t wire_bytes = 0;
    uint64_t fp32_bytes = 0;
  };

  Worker(const WorkerOptions& options, std::shared_ptr<const TransportSecurity> security);

  std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) const;
  std::chrono::system_clock::time_point RpcDeadline() const;
  // How long a push waits for its turn on the uplink (UplinkTurn): one
  // RPC's timeout, so that a later shard whose server stalls holds the
  // others up no longer than its own push could.
  std::chrono::steady_clock::time_point TurnWaitLimit() const;
  Status ValidateShardMap(const v1::ShardMap& map, size_t num_elements) const;
  StatusOr<v1::ClusterView> WaitForReadyView(v1::ClusterView view);
  Status InitShard(Shard& shard, std::span<const float> initial);
  // Polls ShardStatus (no payloads) until every shard holds parameters: true,
  // or false after `max_wait` (or when a shard cannot be asked).
  bool AllShardsInitialized(std::chrono::milliseconds max_wait);
  // Encodes into *out_req (kept for a push again) and pushes it, the first
  // attempt once `turn` is ready (ending the turn after it).
  Status PushShard(Shard& shard, std::span<const float> grads, uint64_t step,
                   EncodeStats* stats, UplinkTurn& turn, v1::PushRequest* out_req);
  // The same push, sent in parts while the gradient is computed: each part
  // of the shard is encoded and written to a placed PushStream as soon as
  // `progress` says it is final (the end of the shard first). When the
  // stream fails with UNAVAILABLE, the whole encoded request is sent again
  // as PushShard would. Aborted, with the stream cancelled, when the
  // computation fails. The stream may stay open until the step's
  // `deadline` (the computation may outlast one RPC's deadline). Parts are
  // encoded as they become final, and written while `turn` is ready; the
  // turn ends once the last part is written.
  // Precondition: the shard's encoder encodes in parts and
  // options_.push_chunk_bytes > 0.
  Status PushShardInParts(Shard& shard, std::span<const float> grads, uint64_t step,
                          std::chrono::steady_clock::time_point deadline,
                          GradientProgress& progress, EncodeStats* stats, UplinkTurn& turn,
                          v1::PushRequest* out_req);
  // Push then pull `step` + 1 for one shard. While the shard's server is away
  // (UNAVAILABLE) both retry with backoff until `deadline`; when a pull saw
  // the server go away, the push may have died with it (a restarted server
  // resumes from its checkpoint), so the same request is pushed again.
  // The push starts once `progress` has some of the shard final: in parts
  // (PushShardInParts) when options_.push_parts allows and the shard is not
  // final yet, otherwise whole once it is. The pull's answer crosses the
  // link while the step's computation may still run (it reads *params); it
  // is written into *params only after the computation has returned. With
  // options_.pull_parts the pull is a PullStream opened before the push
  // (OpenStepPull): the server has it waiting when its step begins, even
  // when this push is the step's last, and sends it each part of the
  // answer as soon as the step has made it final. The push takes the
  // uplink in `turn` (options_.ordered_pushes; client/uplink_turns.h).
  void PushAndPull(Shard& shard, std::span<const float> grads, uint64_t step,
                   std::chrono::steady_clock::time_point deadline, std::vector<float>* params,
                   GradientProgress& progress, UplinkTurn& turn, EncodeStats* stats,
                   PullOutcome* pulled, Status* push_status, Status* pull_status);
  // One push RPC with the RPC deadline: PushStream in chunks, or a unary
  // Push when options_.push_chunk_bytes is 0.
  grpc::Status SendPushOnce(Shard& shard, const v1::PushRequest& req, v1::PushResponse* resp);
  // Sends `req` again; while the server is away, retries until `deadline`.
  Status SendPush(Shard& shard, const v1::PushRequest& req,
                  std::chrono::steady_clock::time_point deadline);
  // Pulls until the shard's version >= min_version (bounded by `deadline`),
  // applies the parameters to (*params) and records the version.
  // With `repush`, a pull that found the server away returns Aborted as soon
  // as the server is back below min_version (the caller pushes again).
  // `before_apply`, if set, is called between receiving the answer and
  // writing it into *params (see PushAndPull).
  // `stream`, if set, is a pull opened earlier (OpenStepPull): its answer
  // is read first, and the plain pulls follow only when it brings no
  // answer at min_version (the server away, the wait over, a broken call).
  Status PullShard(Shard& shard, uint64_t min_version, bool want_full,
                   std::chrono::steady_clock::time_point deadline, std::vector<float>* params,
                   PullOutcome* out, bool repush = false,
                   const std::function<void()>& before_apply = {},
                   PullStreamCall* stream = nullptr);
  // The pull request PullShard sends for `min_version`, waiting up to what
  // is left until `deadline` (at most pull_wait_ms).
  v1::PullRequest StepPullRequest(const Shard& shard, uint64_t min_version, bool want_full,
                                  std::chrono::steady_clock::time_point deadline) const;
  std::unique_ptr<PullStreamCall> OpenStepPull(Shard& shard, uint64_t min_version,
                                               std::chrono::steady_clock::time_point deadline);
  // Writes a received answer into *params (after `before_apply`) and
  // records the shard's version, the bytes and the pull's time since
  // `started`.
  Status ApplyAnswer(Shard& shard, const PulledParamsView& answer, uint64_t version,
                     std::chrono::steady_clock::time_point started,
                     const std::function<void()>& before_apply, std::vector<float>* params,
                     PullOutcome* out);
  // Full-copy resynchronisation; `refused_step` is the step whose push was
  // refused, if any (to detect being excluded from the open step).
  Status Resync(std::optional<uint64_t> refused_step, std::vector<float>* params,
                PullOutcome* out);
  Status SendLeave(bool retry);

  WorkerOptions options_;
  std::shared_ptr<const TransportSecurity> security_;  // credentials of every channel
  RetryPolicy retry_;
  std::shared_ptr<grpc::Channel> coordinator_channel_;
  std::unique_ptr<v1::Coordinator::Stub> coordinator_;
  std::vector<Shard> shards_;
  std::unique_ptr<HeartbeatLoop> heartbeat_;
  size_t num_elements_ = 0;
  bool joined_ = false;
  bool initialized_ = false;
  bool left_ = false;

  std::atomic<uint64_t> step_{0};
  std::atomic<uint64_t> worker_id_{0};
  std::atomic<uint32_t> rank_{0};
  std::atomic<uint32_t> world_size_{0};
  std::atomic<bool> expired_{false};
  std::atomic<bool> left_now_{false};  // LeaveNow ran

  mutable std::mutex stats_mu_;
  TrafficStats traffic_;

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<WorkerMetrics> metrics_;
};

}  // namespace loco

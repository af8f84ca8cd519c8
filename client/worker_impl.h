// WorkerImpl: loco::Worker (client/worker.h, where the contract is) over
// gRPC. Internal to the client library: nothing outside client/ includes it.
//
// Its code is in three files: client/worker_impl.cc (connecting, joining,
// leaving), client/worker_step.cc (initial parameters, the step,
// resynchronisation) and client/worker_shard_rpcs.cc (one shard's push and
// pull, and applying an answer to the worker's copy).
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

#include "client/channel_poller.h"
#include "client/gradient_progress.h"
#include "client/heartbeat_loop.h"
#include "client/pull_bytes.h"
#include "client/pull_stream_call.h"
#include "client/pulled_parts.h"
#include "client/pulled_response.h"
#include "client/retry_policy.h"
#include "client/shard_encoder.h"
#include "client/step_abort.h"
#include "client/uplink_turns.h"
#include "client/worker.h"
#include "client/worker_metrics.h"
#include "client/worker_options.h"
#include "client/worker_stats.h"
#include "common/status.h"
#include "proto/loco.grpc.pb.h"
#include "security/transport_security.h"

namespace loco {

class ShardsFinished;  // client/worker_step.cc

class WorkerImpl final : public Worker {
 public:
  WorkerImpl(const WorkerOptions& options, std::shared_ptr<const TransportSecurity> security);
  ~WorkerImpl() override;

  // The public overloads the ones below would hide.
  using Worker::InitParameters;
  using Worker::Rejoin;
  using Worker::Step;
  using Worker::WaitForClusterStep;

  StatusOr<uint64_t> WaitForClusterStep(uint64_t step,
                                        std::chrono::steady_clock::time_point deadline,
                                        std::chrono::milliseconds poll) override;
  Status Join(size_t num_elements) override;
  Status InitParameters(std::span<const float> initial, std::span<float> params) override;
  Status Rejoin(std::span<const float> initial, std::span<float> params) override;
  StatusOr<StepResult> Step(std::span<const float> grads, std::span<float> params) override;
  StatusOr<StepResult> Step(const GradientCompute& compute, std::span<const float> grads,
                            std::span<float> params) override;
  Status SetStepHyper(std::span<const HyperGroup> groups) override;
  Status Leave() override;
  Status LeaveNow() override;
  void InterruptJoin() override { join_interrupted_ = true; }
  void SetInterruptCheck(std::function<bool()> check) override {
    interrupt_check_ = std::move(check);
  }

  uint64_t step() const override { return step_.load(); }
  uint32_t rank() const override { return rank_.load(); }
  uint32_t world_size() const override { return world_size_.load(); }
  uint64_t worker_id() const override { return worker_id_.load(); }
  bool expired() const override { return expired_.load(); }
  size_t num_elements() const override { return num_elements_; }
  std::vector<std::pair<uint64_t, uint64_t>> shard_ranges() const override;
  TrafficStats traffic() const override;
  const std::shared_ptr<prometheus::Registry>& metrics_registry() const override {
    return registry_;
  }

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
    // The hyper-parameters every push of this shard carries
    // (SetStepHyper): the groups that meet its range; none when empty.
    v1::StepHyper hyper;
  };
  struct PullOutcome {
    uint64_t wire_bytes = 0;
    uint64_t fp32_bytes = 0;
  };
  // What each shard's thread of one Step came back with, by shard index.
  struct ShardOutcomes {
    explicit ShardOutcomes(size_t n) : push(n), pull(n), encode(n), pulled(n) {}
    std::vector<Status> push, pull;
    std::vector<EncodeStats> encode;
    std::vector<PullOutcome> pulled;
  };

  // ---- connecting and joining (worker_impl.cc)
  std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) const;
  std::chrono::system_clock::time_point RpcDeadline() const;
  // How long a push waits for its turn on the uplink (UplinkTurn): one
  // RPC's timeout, so that a later shard whose server stalls holds the
  // others up no longer than its own push could.
  std::chrono::steady_clock::time_point TurnWaitLimit() const;
  StatusOr<v1::ClusterView> WaitForReadyView(v1::ClusterView view);
  // The Join RPC, with retries; records the id, rank and world size.
  Status RequestJoin(size_t num_elements, v1::JoinResponse* resp);
  // Leaves the cluster after a failed join and forgets it, so that Join
  // may be called again; returns `why`.
  Status AbandonJoin(Status why);
  // One Shard per entry of `map` (checked), with a channel per server
  // address and an encoder for the gradient's memory.
  Status OpenShards(const v1::ShardMap& map);
  void StartHeartbeat(uint32_t interval_ms);
  Status SendLeave(bool retry);
  // Fills each shard's `hyper` from `groups` (validated against the model
  // size first); on error no shard changes.
  Status FillShardsHyper(std::span<const HyperGroup> groups);

  // ---- initial parameters, the step, resynchronisation (worker_step.cc)
  // Polls ShardStatus (no payloads) until every shard holds parameters: true,
  // or false after `max_wait`, or as soon as `stop_waiting()` is true (both
  // also when a shard cannot be asked).
  bool AllShardsInitialized(std::chrono::milliseconds max_wait,
                            const std::function<bool()>& stop_waiting);
  // Offers `initial` to every shard, unless (rank > 0) the shards got
  // parameters from rank 0 first (see worker_step.cc). Its waits end when
  // interrupt_check_ says so: ABORTED.
  Status OfferInitialParameters(std::span<const float> initial);
  // After a step failed with `failure`: when a stall could explain it, asks
  // the coordinator (one heartbeat) whether this worker is still a member.
  // If not, expired() becomes true and FailedPrecondition says to Rejoin;
  // otherwise `failure` is returned as it is. Why: a process stopped past the
  // heartbeat timeout may see its own deadline pass before the heartbeat
  // thread runs again, and must not take its expiry for a fatal error.
  Status AskMembershipAfter(Status failure);
  // The checks of Step's input and of this worker's state.
  Status CheckStepPreconditions(std::span<const float> grads, std::span<float> params) const;
  // Runs `compute` on this thread while one thread per shard pushes its
  // range of `grads` as it becomes final and pulls step + 1 into `params`
  // once compute has returned. Returns compute's status; sets
  // *compute_ended when compute returned. Then waits for the shards,
  // looking at interrupt_check_ every kInterruptCheckPeriod.
  Status PushAndPullAll(const GradientCompute& compute, std::span<const float> grads,
                        std::span<float> params, uint64_t step, ShardOutcomes* outcomes,
                        std::chrono::steady_clock::time_point* compute_ended);
  // Waits until `finished` counts all `n` shard threads; meanwhile, when
  // interrupt_check_ says so, interrupts `what` ("the step": `abort`, with
  // that name, and the retries through step_interrupted_).
  void WaitForShards(const char* what, size_t n, ShardsFinished& finished, StepAbort& abort);
  // Runs body(i, abort) for every shard i on a thread of its own, and
  // `meanwhile` (when set: the step's gradient computation) on this one,
  // then waits for the shards in WaitForShards; step_interrupted_ is false
  // before and after.
  void RunShardsWatchingInterrupt(const char* what,
                                  const std::function<void(size_t, StepAbort&)>& body,
                                  const std::function<void()>& meanwhile = {});
  // The step's counts from the shards' outcomes; discards the LoCo
  // compensation of every push that was not accepted.
  StepResult TallyStep(uint64_t step, const ShardOutcomes& outcomes);
  // The step's end: the first failure; or, when a push was refused or the
  // shards disagree, a resynchronisation; or step() advanced to the
  // shards' common version.
  Status SettleStep(uint64_t step, const ShardOutcomes& outcomes, std::span<float> params,
                    StepResult* result);
  void CountTraffic(const StepResult& result, bool completed);
  // Full-copy resynchronisation; `refused_step` is the step whose push was
  // refused, if any (to detect being excluded from the open step). Its
  // pulls run on a thread per shard while this thread looks at
  // interrupt_check_, as a step's do.
  Status Resync(std::optional<uint64_t> refused_step, std::span<float> params,
                PullOutcome* out);
  // One round of a resynchronisation: shard i's full pull at
  // min_version[i] where pull[i], into st[i] and outcomes[i].
  void ResyncRound(const std::vector<uint64_t>& min_version, const std::vector<bool>& pull,
                   std::chrono::steady_clock::time_point deadline, std::span<float> params,
                   std::vector<Status>* st, std::vector<PullOutcome>* outcomes);

  // ---- one shard's RPCs (worker_shard_rpcs.cc)
  // Offers shard's range of `initial`; `abort` ends its retries and cancels
  // the attempt in flight.
  Status InitShard(Shard& shard, std::span<const float> initial, StepAbort* abort);
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
  // PushShardInParts' loop: encodes the shard's parts into `gradient`, the
  // end first, each once `progress` has it final, and hands what is encoded
  // to `write_down_to(from)` (which writes [from, ...) while `turn` is
  // ready). Aborted when the computation fails.
  Status EncodePartsAsFinal(Shard& shard, std::span<const float> grads, uint64_t step,
                            size_t part, GradientProgress& progress, const UplinkTurn& turn,
                            v1::Payload* gradient, EncodeStats* stats,
                            const std::function<void(size_t)>& write_down_to);
  // Push then pull `step` + 1 for one shard. While the shard's server is away
  // (UNAVAILABLE) both retry with backoff until `deadline`; when a pull saw
  // the server go away, the push may have died with it (a restarted server
  // resumes from its checkpoint), so the same request is pushed again.
  // The push starts once `progress` has some of the shard final: in parts
  // (PushShardInParts) when options_.push_parts allows and the shard is not
  // final yet, otherwise whole once it is. The pull's answer crosses the
  // link while the step's computation may still run (it reads `params`); it
  // is written into `params` only after the computation has returned. With
  // options_.pull_parts the pull is a PullStream opened before the push
  // (OpenStepPull): the server has it waiting when its step begins, even
  // when this push is the step's last, and sends it each part of the
  // answer as soon as the step has made it final. The push takes the
  // uplink in `turn` (options_.ordered_pushes; client/uplink_turns.h). A
  // push refused for good aborts the step on every shard (`abort`, shared
  // by the step's shard threads; client/step_abort.h).
  void PushAndPull(Shard& shard, std::span<const float> grads, uint64_t step,
                   std::chrono::steady_clock::time_point deadline, std::span<float> params,
                   GradientProgress& progress, UplinkTurn& turn, StepAbort& abort,
                   EncodeStats* stats, PullOutcome* pulled, Status* push_status,
                   Status* pull_status);
  // PushAndPull's push, whole or in parts, once some of the shard is final.
  Status PushWhenFinal(Shard& shard, std::span<const float> grads, uint64_t step,
                       std::chrono::steady_clock::time_point deadline,
                       GradientProgress& progress, UplinkTurn& turn, EncodeStats* stats);
  // One push RPC with the RPC deadline: PushStream in chunks, or a unary
  // Push when options_.push_chunk_bytes is 0.
  grpc::Status SendPushOnce(Shard& shard, const v1::PushRequest& req, v1::PushResponse* resp);
  // After the shard refused this worker's push of `step` for good
  // (INVALID_ARGUMENT: hyper-parameters that disagree with the step's, say):
  // tells it not to wait for this worker (PushRequest.withdraw), so that the
  // other workers' step completes. One unary call with the RPC deadline,
  // retried like any call; a failure is logged only (the step already failed).
  void WithdrawFromStep(Shard& shard, uint64_t step);
  // The end of an error from a server that stayed away for the whole step.
  std::string AwayUntilDeadline() const;
  // The end of an error from a shard whose step did not complete in time:
  // whom it still waits for (ShardStatus.awaiting, asked once with the RPC
  // deadline), e.g. a member that never pushes; empty when it cannot say.
  std::string AwaitedBy(Shard& shard) const;
  // Sends `req` again; while the server is away, retries until `deadline`.
  Status SendPush(Shard& shard, const v1::PushRequest& req,
                  std::chrono::steady_clock::time_point deadline);
  // Pulls until the shard's version >= min_version (bounded by `deadline`),
  // applies the parameters to `params` and records the version.
  // With `repush`, a pull that found the server away returns Aborted as soon
  // as the server is back below min_version (the caller pushes again).
  // `before_apply`, if set, is called between receiving the answer and
  // writing it into `params` (see PushAndPull).
  // `stream`, if set, is a pull opened earlier (OpenStepPull): its answer
  // is read first, and the plain pulls follow only when it brings no
  // answer at min_version (the server away, the wait over, a broken call).
  // `abort`, if set, cancels the pulls of an aborted step.
  Status PullShard(Shard& shard, uint64_t min_version, bool want_full,
                   std::chrono::steady_clock::time_point deadline, std::span<float> params,
                   PullOutcome* out, bool repush = false,
                   const std::function<void()>& before_apply = {},
                   PullStreamCall* stream = nullptr, StepAbort* abort = nullptr);
  // The pull request PullShard sends for `min_version`, waiting up to what
  // is left until `deadline` (at most pull_wait_ms).
  v1::PullRequest StepPullRequest(const Shard& shard, uint64_t min_version, bool want_full,
                                  std::chrono::steady_clock::time_point deadline) const;
  std::unique_ptr<PullStreamCall> OpenStepPull(Shard& shard, uint64_t min_version,
                                               std::chrono::steady_clock::time_point deadline);
  // Writes a received answer into `params` (after `before_apply`) and
  // records the shard's version, the bytes and the pull's time since
  // `started`.
  Status ApplyAnswer(Shard& shard, const PulledParamsView& answer, uint64_t version,
                     std::chrono::steady_clock::time_point started,
                     const std::function<void()>& before_apply, std::span<float> params,
                     PullOutcome* out);

  WorkerOptions options_;
  std::shared_ptr<const TransportSecurity> security_;  // credentials of every channel
  RetryPolicy retry_;
  // Before every channel (MakeChannel registers each): polls while one
  // reconnects (a worker process has no gRPC server whose threads would).
  mutable ChannelPoller poller_;  // Watch is thread-safe; MakeChannel is const
  std::shared_ptr<grpc::Channel> coordinator_channel_;
  std::unique_ptr<v1::Coordinator::Stub> coordinator_;
  std::vector<Shard> shards_;
  std::vector<HyperGroup> hyper_groups_;  // SetStepHyper's, refilled per shard on a new map
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
  // LeaveNow's Leave was answered: Leave and the destructor send none.
  std::atomic<bool> left_now_told_{false};
  std::atomic<bool> join_interrupted_{false};  // InterruptJoin, until Join starts again
  std::function<bool()> interrupt_check_;      // SetInterruptCheck
  // The step (or resynchronisation) running now was interrupted
  // (interrupt_check_): its retries stop. Cleared when one starts and when
  // it has ended; read by its shard threads.
  std::atomic<bool> step_interrupted_{false};
  // JoinResponse.ticket: proves to the coordinator that Heartbeat and Leave,
  // and to the shards that InitShard, Push and Pull, come from this worker.
  // Guarded by ticket_mu_ (LeaveNow and the shard threads read it).
  mutable std::mutex ticket_mu_;
  std::string ticket_;
  std::string ticket() const {
    std::lock_guard<std::mutex> lock(ticket_mu_);
    return ticket_;
  }

  mutable std::mutex stats_mu_;
  TrafficStats traffic_;

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<WorkerMetrics> metrics_;
};

}  // namespace loco

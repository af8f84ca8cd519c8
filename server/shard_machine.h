// ShardMachine: one parameter-server shard's state and its rules, without
// any transport: initialisation, push aggregation, the optimizer step, the
// return path, checkpoints and pulls that wait for a version. ShardService
// is its gRPC adapter; tests drive it directly.
//
// Contracts (see proto/loco.proto):
// * Every request is validated completely before any state changes; a
//   rejected request leaves params, m, v, version and the open step as they
//   were.
// * Step t (= the current version) waits for the live participants that the
//   coordinator froze for t. The first push of a step fetches that set (one
//   coordinator call, cached); RefreshParticipants() (called periodically by
//   the owner while pushes are pending) re-asks for the live subset so that
//   a worker that left or expired stops being waited for.
// * When every live participant pushed (and at least one did) the step
//   completes under the lock: mean of the payloads, AdamW (clipping is per
//   shard, see ShardStore::Apply), version++, return path updated, waiting
//   pulls woken.
// * A step's AdamW hyper-parameters come with its pushes (PushRequest.hyper;
//   a push without them stands for options.hyper, the server's flags): the
//   first accepted push of a step fixes them, and a later push of the step
//   whose hyper-parameters differ on any element is refused
//   (InvalidArgument, both values shown) and changes nothing. Clipping
//   (options.hyper.max_grad_norm) stays the server's.
// * Nothing waits without a deadline: coordinator calls carry the
//   MembershipSource's deadline; pulls wait at most min(wait_ms,
//   max_pull_wait).
// * A pull that waits for the next version's answer (a delta, or the bf16
//   copy) may take each part from the step as soon as it is encoded
//   (AnswerParts, its own lock, taken under the shard's and never the other
//   way round; see NextAnswerFor) and send it without the shard's lock.
//
// Thread-safe: one mutex guards the shard's state; coordinator calls are made
// without holding it. The MembershipSource must outlive the machine.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "common/shard_layout.h"
#include "common/status.h"
#include "kernels/adamw.h"
#include "proto/loco.pb.h"
#include "server/answer_parts.h"
#include "server/checkpoint.h"
#include "server/hyper_groups.h"
#include "server/membership_source.h"
#include "server/owned_payload.h"
#include "server/payload_buffers.h"
#include "server/return_path.h"
#include "server/server_metrics.h"
#include "server/shard_step.h"
#include "server/shard_store.h"
#include "server/step_aggregator.h"

namespace loco {

// The most threads ShardMachineOptions::apply_threads may ask for.
constexpr uint32_t kMaxApplyThreads = 64;

struct ShardMachineOptions {
  uint32_t shard_id = 0;
  // The hyper-parameters of a push that carries none, and clipping.
  AdamWParams hyper;
  ReturnPathOptions return_path;
  std::chrono::milliseconds max_pull_wait{60000};
  // Stragglers: a step completes once all but this many live participants
  // pushed (0 = wait for every live participant). A late push is refused as
  // "already applied" and its worker resynchronises.
  uint32_t straggler_slack = 0;
  // Threads a step's decode, AdamW and return-delta encoding run on (the
  // shard's range is shared out in pieces; the result is the same for every
  // count). The step is applied while every worker waits for it, so more
  // threads shorten every step on a server with cores to spare. >= 1.
  uint32_t apply_threads = 1;
  // When > 0, a copy of the state is kept for the owner to write after every
  // checkpoint_every-th step (TakeDueCheckpoint), and the next step does not
  // complete until the owner calls CheckpointDone (pushes are still accepted
  // meanwhile): a crash then never loses more than checkpoint_every steps.
  uint64_t checkpoint_every = 0;
  // Called (under the shard's lock; must not call back) when a checkpoint is due.
  std::function<void()> on_checkpoint_due;
  ServerMetrics* metrics = nullptr;  // not owned; must outlive the machine; null = none
};

class ShardMachine {
 public:
  ShardMachine(ShardMachineOptions options, MembershipSource* membership);
  static Status ValidateOptions(const ShardMachineOptions& options);

  const ShardMachineOptions& options() const { return options_; }

  // The first writer wins: AlreadyExists once initialised. The worker must
  // be a current member (one coordinator call).
  Status InitShard(const v1::InitShardRequest& req, v1::InitShardResponse* resp);
  // Takes the gradient's bytes out of `*req` when the payload passes its
  // checks (the request is spent either way). A duplicate (same worker,
  // step) is acknowledged with resp->duplicate() and changes nothing, its
  // hyper-parameters unread beyond their own checks (server/push_hyper.h).
  // A request with `withdraw` set is a withdrawal from its step instead
  // (PushRequest.withdraw in proto/loco.proto; Withdraw below).
  Status Push(v1::PushRequest* req, v1::PushResponse* resp);
  // Waits as the request asks, then fills `header` (every field but the
  // payload's bytes) and `body` (those bytes, shared; see ReturnPath).
  Status Pull(const v1::PullRequest& req, v1::PullResponse* header,
              ReturnPath::SharedBody* body);
  // The same answer as one message (the body copied in).
  Status Pull(const v1::PullRequest& req, v1::PullResponse* resp);
  Status ShardStatus(const v1::ShardStatusRequest& req, v1::ShardStatusResponse* resp);

  // For a pull that may get the next version's answer in parts: a pull for
  // the next version (have_version = version, min_version = version + 1, no
  // want_full; the delta or bf16 return path) that arrives before the step
  // gets the parts of version + 1 as the step encodes them (AnswerParts);
  // null for every other pull (Pull answers it). Unavailable when stopping.
  StatusOr<std::shared_ptr<AnswerParts>> NextAnswerFor(const v1::PullRequest& req);
  // A pull got the whole of `version`'s answer in parts: counted as Pull
  // counts its answers (see awaiting_pull_) if that is still the version.
  void AnswerSent(uint64_t worker_id, uint64_t version);

  // Learns this shard's range from the coordinator's cluster view (once).
  // Unavailable until the coordinator is reachable and the model size fixed.
  // A range restored from a checkpoint is confirmed first (below), and
  // after ConfirmRestoredRange refused the layout, every call returns that
  // refusal.
  Status EnsureRange();
  bool range_known() const;
  // A range restored from a checkpoint (RestoreFrom) was not given by the
  // coordinator's layout: this asks for the cluster view and compares the
  // range and, when the checkpoint holds it, the model's size. OK once they
  // agree (range_unconfirmed() is then false, and no request asks again).
  // While the coordinator knows no model size yet (restarted too): with the
  // checkpoint's model size, Unavailable (retry; this server's registration
  // reports that size, and the coordinator learns its layout from it);
  // without it (a format-1 checkpoint) OK, unchecked (nothing can tell),
  // asked again next time. Unavailable (retry) while the coordinator is
  // unreachable; FailedPrecondition naming both ranges when they differ, kept: every
  // later request is refused with it (a shard serving another range would
  // take every worker's push as malformed). EnsureRange calls it on every
  // request until confirmed, and the server's background loop while
  // range_unconfirmed(), so that a mismatch is logged without traffic.
  Status ConfirmRestoredRange();
  bool range_unconfirmed() const;
  // The range, once known.
  std::optional<ShardRange> range() const;
  // The buffers of closed steps' pushes, for the push streams to assemble
  // into (thread-safe; server/payload_buffers.h).
  PayloadBuffers& push_buffers() { return *push_buffers_; }
  // Re-asks the coordinator for the open step's live participants when
  // pushes are pending, and completes the step if nobody else is awaited.
  Status RefreshParticipants();
  // What this shard reports when it registers with the coordinator (again):
  // the model size and its range once known, its version, and the
  // participants of the open step (once fetched) or else of the last
  // completed one (proto/loco.proto, RegisterServerRequest). Fills those
  // fields of `req` only.
  void FillRegistration(v1::RegisterServerRequest* req) const;
  // Wakes waiting pulls (they return Unavailable); later pulls fail fast.
  void Stop();

  // Restart from a checkpoint (call before serving). The shard then counts
  // as restored until its first completed step: while restored, a push for
  // a step ahead of the shard fast-forwards it to that step (the workers only
  // push steps that every shard reached, so the cluster is there; the updates
  // of the steps in between are lost on this shard, and pushes held for the
  // older step are dropped). FailedPrecondition when already initialised.
  Status RestoreFrom(ShardCheckpoint checkpoint);
  // A consistent copy of the state (taken under the lock), for a checkpoint
  // written outside it; nullopt until initialised.
  std::optional<ShardCheckpoint> CheckpointState() const;
  // The copy kept after the latest checkpoint_every-th step, if not taken yet.
  std::optional<ShardCheckpoint> TakeDueCheckpoint();
  // The due checkpoint was written (or failed, logged): the open step may
  // complete again.
  void CheckpointDone();

  // Copies of the state, for checkpoints and tests.
  ShardStore Snapshot() const;
  std::vector<float> ReturnReplica() const;
  uint32_t pending_pushes() const;

 private:
  struct StepMembers {
    uint64_t step = 0;
    uint64_t incarnation = 0;  // the coordinator's; epochs count within one
    uint64_t epoch = 0;
    std::vector<uint64_t> participants;  // ascending
    std::vector<uint64_t> live;          // ascending
  };

  Status CheckShardId(uint32_t shard_id) const;
  // OK when the coordinator lists `worker_id` as a current member (one
  // coordinator call; never under mu_).
  Status CheckMember(uint64_t worker_id) const;
  Status NotInitialized() const;
  Status AlreadyInitializedLocked() const;
  Status CheckStepLocked(uint64_t step) const;
  bool IsParticipantLocked(uint64_t worker_id, uint64_t step) const;
  // A fresh answer from the coordinator for a push (never under mu_).
  StatusOr<v1::StepParticipantsResponse> FetchParticipants(uint64_t step, uint32_t pushes);
  void AdoptParticipantsLocked(const v1::StepParticipantsResponse& fetched);

  // Push's phases, after the payload passed its checks. ParticipantsAhead:
  // the participants of `step`, ahead of a restored shard, when `worker` is
  // one of them. AddPush: holds the payload for the open step when the
  // worker is a participant (the cached set, then one fresh answer); `ahead`,
  // when set, first fast-forwards a restored shard to `step`.
  StatusOr<v1::StepParticipantsResponse> ParticipantsAhead(uint64_t step, uint64_t worker);
  // Runs `attempt` under mu_ and returns its result; when it returns nullopt
  // (the worker is not a participant of `step` in the cached set) it runs
  // once more after one fresh answer from the coordinator (taken outside
  // mu_), and a second nullopt returns outsider()'s refusal. A template
  // (defined in shard_machine.cc, its only user) so that a push, on every
  // step's path, wraps no std::function.
  template <typename Attempt, typename Outsider>
  Status AsParticipant(uint64_t step, const Attempt& attempt, const Outsider& outsider);
  Status AddPush(uint64_t step, uint64_t worker,
                 const std::optional<v1::StepParticipantsResponse>& ahead,
                 OwnedPayload payload, HyperGroups hyper, v1::PushResponse* resp);
  // A participant of the open step that will not push it here: the step
  // stops waiting for it (StepAggregator::Withdraw) and may complete.
  Status Withdraw(const v1::PushRequest& req, v1::PushResponse* resp);
  // OK when the open step has no hyper-parameters yet or `hyper` gives every
  // element the same values; else InvalidArgument showing both.
  Status CheckHyperAgreesLocked(uint64_t step, const HyperGroups& hyper) const;
  void AddPushLocked(uint64_t worker, OwnedPayload payload, v1::PushResponse* resp);

  // Completes the open step when every live participant pushed.
  Status MaybeCompleteLocked();
  Status ApplyStepLocked();
  // Hooks that hand the step's answer, piece by piece, to `answer`'s pulls.
  ShardStepHooks HooksForAnswerLocked(std::shared_ptr<AnswerParts> answer, uint64_t step);
  // After the step's computation: logs, counts, schedules a checkpoint and
  // opens the next step.
  void FinishStepLocked(uint64_t step, double decode_seconds, double apply_seconds);
  ShardCheckpoint CheckpointLocked() const;
  // A pull of `worker_id` got the current version: see awaiting_pull_.
  void MarkPulledLocked(uint64_t worker_id);
  // Whether a pull could get the next version's answer in parts.
  bool StreamableLocked(const v1::PullRequest& req) const;
  // The parts of version + 1, made on first use; AbandonAnswerLocked
  // releases its waiters (the step will not make them).
  std::shared_ptr<AnswerParts> AnswerForNextLocked();
  void AbandonAnswerLocked();
  void FastForwardLocked(uint64_t step);

  const ShardMachineOptions options_;
  MembershipSource* const membership_;

  mutable std::mutex mu_;
  std::condition_variable version_cv_;  // signalled on init, step, Stop
  std::optional<ShardRange> range_;
  ShardStore store_;
  StepAggregator step_;
  // Refilled by each step_.Open; shared with the fp32 answers' deleters
  // (ReturnPath), which may run after the machine is gone.
  const std::shared_ptr<PayloadBuffers> push_buffers_ = std::make_shared<PayloadBuffers>();
  std::optional<StepMembers> members_;  // the open step's participants, once fetched
  std::optional<StepMembers> last_members_;  // the last completed step's
  // The model's: from the coordinator with the range, or from a checkpoint
  // (0 from a format-1 file until the range is confirmed).
  uint64_t total_elements_ = 0;
  // The coordinator's layout gave or confirmed range_ (false while a range
  // restored from a checkpoint waits for ConfirmRestoredRange).
  bool range_confirmed_ = false;
  Status layout_refused_;                    // ConfirmRestoredRange's refusal, once made
  ReturnPath return_path_;
  // Workers whose pushes made the current version and that have not pulled
  // it yet; when the last one has, the return path drops the bodies it can
  // make again. Empty after init and restore, where the first push of the
  // next step drops them instead.
  std::vector<uint64_t> awaiting_pull_;
  // The answer of version + 1 in parts, once a pull waits for it.
  std::shared_ptr<AnswerParts> next_answer_;
  bool stopping_ = false;
  bool restored_ = false;  // restored from a checkpoint, no step completed since
  std::optional<ShardCheckpoint> due_checkpoint_;
  bool checkpoint_pending_ = false;  // due and not yet written: the open step waits
};

}  // namespace loco

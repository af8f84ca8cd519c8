// ShardMachine: checks, InitShard, Push, the step and ShardStatus. The
// range is in shard_machine_range.cc, pulls in shard_machine_pull.cc,
// restore and checkpoints in shard_machine_lifecycle.cc.
#include "server/shard_machine.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/log.h"
#include "rpc/payload_bytes.h"
#include "server/push_hyper.h"

namespace loco {
namespace {

// Data bytes per wake-up of the pulls that wait for a step's answer in parts.
constexpr uint64_t kAnswerWakeBytes = 256 * 1024;

bool Contains(const std::vector<uint64_t>& sorted, uint64_t id) {
  return std::binary_search(sorted.begin(), sorted.end(), id);
}

// The coordinator did not answer a question about `step`'s participants:
// the push is retried.
Status ParticipantsUnknown(uint64_t step, const Status& why) {
  return Unavailable("cannot learn the participants of step " + std::to_string(step) + ": " +
                     why.ToString() + "; retry the push");
}

}  // namespace

ShardMachine::ShardMachine(ShardMachineOptions options, MembershipSource* membership)
    : options_(options), membership_(membership), return_path_([&] {
        ReturnPathOptions r = options.return_path;
        r.threads = options.apply_threads;
        return r;
      }(), push_buffers_) {}

Status ShardMachine::ValidateOptions(const ShardMachineOptions& o) {
  LOCO_RETURN_IF_ERROR(ValidateAdamWParams(o.hyper));
  LOCO_RETURN_IF_ERROR(ReturnPath::ValidateOptions(o.return_path));
  if (o.max_pull_wait.count() <= 0) return InvalidArgument("max pull wait must be > 0 ms");
  if (o.apply_threads < 1 || o.apply_threads > kMaxApplyThreads) {
    return InvalidArgument("apply threads must be in [1, " + std::to_string(kMaxApplyThreads) +
                           "], got " + std::to_string(o.apply_threads));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- checks

Status ShardMachine::CheckShardId(uint32_t shard_id) const {
  if (shard_id != options_.shard_id) {
    return NotFound("shard " + std::to_string(shard_id) +
                    " is not served here; this server holds shard " +
                    std::to_string(options_.shard_id) + " (see the coordinator's shard map)");
  }
  return Status::Ok();
}

Status ShardMachine::CheckMember(uint64_t worker_id) const {
  if (worker_id == 0) {
    return InvalidArgument("worker_id 0 names no worker; Join the coordinator first and send "
                           "the id it assigns");
  }
  auto view = membership_->GetClusterView();
  if (!view.ok()) {
    return Unavailable("cannot check that worker " + std::to_string(worker_id) + " is a member: " +
                       view.status().ToString() + "; retry");
  }
  const auto& ids = view->worker_ids();
  if (std::find(ids.begin(), ids.end(), worker_id) == ids.end()) {
    return FailedPrecondition("worker " + std::to_string(worker_id) +
                              " is not a member of the cluster "
                              "(unknown, left or expired); Join the coordinator first");
  }
  return Status::Ok();
}

Status ShardMachine::NotInitialized() const {
  return FailedPrecondition("shard " + std::to_string(options_.shard_id) +
                            " is not initialised; a worker must call InitShard first");
}

Status ShardMachine::AlreadyInitializedLocked() const {
  return AlreadyExists("shard " + std::to_string(options_.shard_id) +
                       " is already initialised (version " + std::to_string(store_.version()) +
                       "); pull the parameters instead");
}

Status ShardMachine::CheckStepLocked(uint64_t step) const {
  const uint64_t version = store_.version();
  if (step < version) {
    return FailedPrecondition("step " + std::to_string(step) +
                              " already applied (shard at version " + std::to_string(version) +
                              "); pull and resynchronise");
  }
  if (step > version) {
    return FailedPrecondition("step " + std::to_string(step) + " is ahead of the shard (version " +
                              std::to_string(version) + ")");
  }
  return Status::Ok();
}

bool ShardMachine::IsParticipantLocked(uint64_t worker_id, uint64_t step) const {
  return members_ && members_->step == step && Contains(members_->participants, worker_id);
}

// ---------------------------------------------------------------- InitShard

Status ShardMachine::InitShard(const v1::InitShardRequest& req, v1::InitShardResponse* resp) {
  LOCO_RETURN_IF_ERROR(CheckShardId(req.shard_id()));
  LOCO_RETURN_IF_ERROR(EnsureRange());
  if (req.params().codec() != v1::CODEC_FP32) {
    return InvalidArgument("InitShard needs CODEC_FP32 parameters, got codec " +
                           std::to_string(static_cast<int>(req.params().codec())));
  }
  ShardRange range;
  {
    std::lock_guard<std::mutex> lock(mu_);
    range = *range_;
  }
  // Checked in place and copied once, into the store's own vector: the
  // request already holds 4 bytes per element, and every further copy
  // would add to the server's peak memory.
  LOCO_RETURN_IF_ERROR(OwnedPayload::Check(req.params(), range));
  std::vector<float> values(range.length);
  if (!values.empty()) {
    std::memcpy(values.data(), req.params().data().data(), values.size() * sizeof(float));
  }
  {
    // Cheap refusal first: the membership check below costs a coordinator call.
    std::lock_guard<std::mutex> lock(mu_);
    if (store_.initialized()) return AlreadyInitializedLocked();
  }
  LOCO_RETURN_IF_ERROR(CheckMember(req.worker_id()));

  std::lock_guard<std::mutex> lock(mu_);
  if (store_.initialized()) return AlreadyInitializedLocked();
  LOCO_RETURN_IF_ERROR(store_.Initialize(range, std::move(values), 0));
  return_path_.Reset(store_.params(), store_.version());
  awaiting_pull_.clear();
  push_buffers_->Recycle(step_.Open(store_.version()));
  members_.reset();
  if (options_.metrics) options_.metrics->OnStepOpened(store_.version());
  resp->set_version(store_.version());
  LOG_INFO("shard " << options_.shard_id << " initialised by worker " << req.worker_id() << " ("
                    << range.length << " parameters)");
  version_cv_.notify_all();
  return Status::Ok();
}

// ---------------------------------------------------------------- Push

Status ShardMachine::Push(v1::PushRequest* request, v1::PushResponse* resp) {
  const v1::PushRequest& req = *request;
  LOCO_RETURN_IF_ERROR(CheckShardId(req.shard_id()));
  LOCO_RETURN_IF_ERROR(EnsureRange());
  if (req.withdraw()) return Withdraw(req, resp);
  ShardRange range;
  bool fast_forward = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!store_.initialized()) return NotInitialized();
    range = *range_;
    // Refuse the wrong step before the payload is copied and checked.
    fast_forward = restored_ && req.step() > store_.version();
    if (!fast_forward) LOCO_RETURN_IF_ERROR(CheckStepLocked(req.step()));
  }
  auto payload = OwnedPayload::FromProto(std::move(*request->mutable_gradient()), range);
  if (!payload.ok()) return payload.status();
  LOCO_RETURN_IF_ERROR(payload->CheckGradientMagnitude());
  auto hyper = PushHyper(req, range, options_.hyper);
  if (!hyper.ok()) return hyper.status();

  std::optional<v1::StepParticipantsResponse> ahead;
  if (fast_forward) {
    auto fetched = ParticipantsAhead(req.step(), req.worker_id());
    if (!fetched.ok()) return fetched.status();
    ahead = std::move(fetched).value();
  }
  return AddPush(req.step(), req.worker_id(), ahead, std::move(payload).value(),
                 std::move(hyper).value(), resp);
}

StatusOr<v1::StepParticipantsResponse> ShardMachine::FetchParticipants(uint64_t step,
                                                                       uint32_t pushes) {
  auto fetched = membership_->GetStepParticipants(step, options_.shard_id, pushes);
  if (!fetched.ok()) return ParticipantsUnknown(step, fetched.status());
  return fetched;
}

// A restored shard fast-forwards to a step ahead of it (see RestoreFrom),
// but only to a step the cluster has reached (the coordinator refuses one
// further ahead with FailedPrecondition, passed on to the pusher) and only
// for a participant of that step: otherwise any client could move the
// shard's version to an arbitrary step.
StatusOr<v1::StepParticipantsResponse> ShardMachine::ParticipantsAhead(uint64_t step,
                                                                       uint64_t worker) {
  auto fetched = membership_->GetStepParticipants(step, options_.shard_id, 0);
  if (!fetched.ok() && fetched.status().code() == StatusCode::kFailedPrecondition) {
    return FailedPrecondition("this restored shard does not fast-forward to step " +
                              std::to_string(step) + ": " + fetched.status().message());
  }
  if (!fetched.ok()) return ParticipantsUnknown(step, fetched.status());
  const auto& ids = fetched->participants();
  if (std::find(ids.begin(), ids.end(), worker) == ids.end()) {
    return FailedPrecondition("worker " + std::to_string(worker) +
                              " is not a participant of step " + std::to_string(step) +
                              "; a restored shard only fast-forwards for a "
                              "participant of the step it is pushed");
  }
  return fetched;
}

template <typename Attempt, typename Outsider>
Status ShardMachine::AsParticipant(uint64_t step, const Attempt& attempt,
                                   const Outsider& outsider) {
  for (int round = 0; round < 2; ++round) {
    uint32_t pushes = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (std::optional<Status> done = attempt()) return *done;
      if (round == 1) break;
      pushes = static_cast<uint32_t>(step_.size());
    }
    auto fetched = FetchParticipants(step, pushes);
    if (!fetched.ok()) return fetched.status();
    std::lock_guard<std::mutex> lock(mu_);
    AdoptParticipantsLocked(*fetched);
  }
  return outsider();
}

Status ShardMachine::AddPush(uint64_t step, uint64_t worker,
                             const std::optional<v1::StepParticipantsResponse>& ahead,
                             OwnedPayload payload, HyperGroups hyper, v1::PushResponse* resp) {
  const auto attempt = [&]() -> std::optional<Status> {
    if (restored_ && step > store_.version()) {
      if (!ahead) return CheckStepLocked(step);  // restored since the check above
      FastForwardLocked(step);
      AdoptParticipantsLocked(*ahead);
    }
    LOCO_RETURN_IF_ERROR(CheckStepLocked(step));
    resp->set_version(store_.version());
    if (step_.Has(worker)) {
      resp->set_duplicate(true);
      return Status::Ok();
    }
    if (!IsParticipantLocked(worker, step)) return std::nullopt;
    LOCO_RETURN_IF_ERROR(CheckHyperAgreesLocked(step, hyper));
    step_.FixHyper(std::move(hyper));
    AddPushLocked(worker, std::move(payload), resp);
    return Status::Ok();
  };
  return AsParticipant(step, attempt, [&] {
    return FailedPrecondition("worker " + std::to_string(worker) +
                              " is not a participant of step " + std::to_string(step) +
                              " (its participants were fixed when it opened: a worker "
                              "that joined since takes part from the next step); pull version " +
                              std::to_string(step + 1));
  });
}

Status ShardMachine::Withdraw(const v1::PushRequest& req, v1::PushResponse* resp) {
  const uint64_t step = req.step(), worker = req.worker_id();
  if (req.has_gradient() || req.has_hyper()) {
    return InvalidArgument(
        "a withdrawal (withdraw = true) carries no gradient and no "
        "hyper-parameters; to push, leave withdraw unset");
  }
  const auto attempt = [&]() -> std::optional<Status> {
    if (!store_.initialized()) return NotInitialized();
    LOCO_RETURN_IF_ERROR(CheckStepLocked(step));
    resp->set_version(store_.version());
    if (step_.Has(worker)) {
      return FailedPrecondition("worker " + std::to_string(worker) + " pushed step " +
                                std::to_string(step) + " to shard " +
                                std::to_string(options_.shard_id) + ": a push is not withdrawn");
    }
    if (!IsParticipantLocked(worker, step)) return std::nullopt;
    resp->set_duplicate(!step_.Withdraw(worker));
    if (resp->duplicate()) return Status::Ok();
    LOG_WARN("shard " << options_.shard_id << ": worker " << worker << " withdrew from step "
                      << step << " (its push was refused); the step goes on without it");
    if (options_.metrics) options_.metrics->OnPushWithdrawn();
    const Status s = MaybeCompleteLocked();
    if (!s.ok()) LOG_ERROR("shard " << options_.shard_id << ": " << s.ToString());
    resp->set_version(store_.version());
    return Status::Ok();
  };
  return AsParticipant(step, attempt, [&] {
    return FailedPrecondition("worker " + std::to_string(worker) +
                              " is not a participant of step " + std::to_string(step) +
                              ": it has nothing to withdraw");
  });
}

Status ShardMachine::CheckHyperAgreesLocked(uint64_t step, const HyperGroups& hyper) const {
  const HyperGroups* fixed = step_.hyper();
  if (fixed == nullptr) return Status::Ok();  // the step's first push fixes them
  const std::string difference = fixed->Difference(hyper, store_.range().offset);
  if (difference.empty()) return Status::Ok();
  return InvalidArgument("the workers of step " + std::to_string(step) + " disagree on its "
                         "hyper-parameters (the step's, fixed by its first push, vs this "
                         "push's): " + difference + "; this push is refused");
}

void ShardMachine::AddPushLocked(uint64_t worker, OwnedPayload payload,
                                 v1::PushResponse* resp) {
  step_.Add(worker, std::move(payload));
  if (options_.metrics) options_.metrics->OnPushAdded(step_.size());
  // A worker pushes only once it holds the current version, so the
  // answers of this version are mostly sent: the next step's payloads
  // must not pile up beside them. This catches versions whose pullers
  // the server cannot know (after init or a restore: every joining
  // worker pulls a full fp32 copy); a late pull makes its answer again.
  return_path_.ReleaseRemakeableBodies();
  // The first step's moments, while the step waits for the other
  // pushes rather than inside its AdamW (a no-op after the first).
  (void)store_.AllocateMoments();  // initialised: checked by the caller
  Status s = MaybeCompleteLocked();
  if (!s.ok()) LOG_ERROR("shard " << options_.shard_id << ": " << s.ToString());
  resp->set_version(store_.version());
}

void ShardMachine::AdoptParticipantsLocked(const v1::StepParticipantsResponse& fetched) {
  if (!store_.initialized() || fetched.step() != store_.version()) return;  // stale
  // Within a step, a newer answer only: epochs count within one incarnation
  // of the coordinator, and a restarted one starts them again.
  if (members_ && members_->step == fetched.step() &&
      std::make_pair(members_->incarnation, members_->epoch) >
          std::make_pair(fetched.incarnation(), fetched.epoch())) {
    return;
  }
  StepMembers m;
  m.step = fetched.step();
  m.incarnation = fetched.incarnation();
  m.epoch = fetched.epoch();
  m.participants.assign(fetched.participants().begin(), fetched.participants().end());
  m.live.assign(fetched.live().begin(), fetched.live().end());
  std::sort(m.participants.begin(), m.participants.end());
  std::sort(m.live.begin(), m.live.end());
  members_ = std::move(m);
}

Status ShardMachine::RefreshParticipants() {
  uint64_t step = 0;
  uint32_t pushes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!store_.initialized() || step_.size() == 0) return Status::Ok();
    step = store_.version();
    pushes = static_cast<uint32_t>(step_.size());
  }
  auto fetched = membership_->GetStepParticipants(step, options_.shard_id, pushes);
  if (!fetched.ok()) return fetched.status();
  std::lock_guard<std::mutex> lock(mu_);
  AdoptParticipantsLocked(*fetched);
  return MaybeCompleteLocked();
}

// ---------------------------------------------------------------- the step

Status ShardMachine::MaybeCompleteLocked() {
  if (!members_ || members_->step != store_.version()) return Status::Ok();
  if (checkpoint_pending_) return Status::Ok();  // CheckpointDone completes it
  if (!step_.CompleteFor(members_->live, options_.straggler_slack)) return Status::Ok();
  return ApplyStepLocked();
}

Status ShardMachine::ApplyStepLocked() {
  const uint64_t step = store_.version();
  const auto t0 = std::chrono::steady_clock::now();
  LOCO_RETURN_IF_ERROR(step_.Validate(store_.length()).Annotate("step " + std::to_string(step)));
  // Each piece of the answer (the return delta, or the bf16 copy) is
  // handed, as soon as it is encoded, to the pulls waiting for it in parts
  // (AnswerParts): the answer crosses the link while the rest of the step
  // computes.
  std::shared_ptr<AnswerParts> answer;
  if (next_answer_ && next_answer_->version() == step + 1) answer = next_answer_;
  next_answer_.reset();
  const ShardStepHooks hooks = answer ? HooksForAnswerLocked(answer, step) : ShardStepHooks();
  ShardStepResult computed;
  // The step holds at least one push, and the first fixed the
  // hyper-parameters; the flags only stand in should that ever not hold.
  const Status applied_ok =
      step_.hyper() ? RunShardStep(store_, step_, return_path_, *step_.hyper(),
                                   options_.apply_threads, hooks, &computed)
                    : RunShardStep(store_, step_, return_path_, options_.hyper,
                                   options_.apply_threads, hooks, &computed);
  if (!applied_ok.ok()) {
    if (answer) answer->Abandon();
    return applied_ok.Annotate("step " + std::to_string(step));
  }
  const auto t2 = std::chrono::steady_clock::now();
  const auto t1 = t0 + std::chrono::nanoseconds(computed.decode_ns /
                                                static_cast<int64_t>(computed.stats.threads));
  Status rp = return_path_.FinishAnswer(store_.params(), store_.version(),
                                       std::move(computed.answer));
  if (!rp.ok()) {
    if (answer) answer->Abandon();
    LOG_WARN("return path fell back to a full copy: " << rp.ToString());
  }
  FinishStepLocked(step, std::chrono::duration<double>(t1 - t0).count(),
                   std::chrono::duration<double>(t2 - t1).count());
  return Status::Ok();
}

ShardStepHooks ShardMachine::HooksForAnswerLocked(std::shared_ptr<AnswerParts> answer,
                                                  uint64_t step) {
  // Called by RunShardStep while the caller holds mu_.
  ShardStepHooks hooks;
  hooks.answer_begun = [this, answer, step](const ReturnPath::AnswerBuffers& buffers) {
    if (!buffers.data) {
      answer->Abandon();  // a full sync: the pulls get the fp32 copy
      return;
    }
    v1::PullResponse header;
    return_path_.AnswerHeader(step + 1, store_.range(), &header);
    // Parts of about kAnswerWakeBytes of data each: a dozen writes for a
    // shard of millions of elements, each still a few ms of a 1 Gbit/s link.
    const uint64_t elements = header.params().length();
    const uint64_t wake_every = std::max<uint64_t>(
        1, kAnswerWakeBytes * elements /
               std::max<uint64_t>(1, PayloadDataBytes(header.params(), elements)));
    answer->Begin(header, buffers.data, buffers.scales, wake_every);
  };
  hooks.piece_encoded = [answer](size_t begin, size_t count) { answer->Publish(begin, count); };
  return hooks;
}

void ShardMachine::FinishStepLocked(uint64_t step, double decode_seconds,
                                    double apply_seconds) {
  const size_t received = step_.size();
  const size_t expected = members_ ? members_->participants.size() : 0;
  if (received < expected) {
    LOG_INFO("shard " << options_.shard_id << " step " << step << " completed with " << received
                      << " of " << expected << " participants (" << step_.withdrawn()
                      << " withdrew, the others departed)");
  }
  if (options_.metrics) {
    options_.metrics->OnStepApplied(store_.version(), received, expected, decode_seconds,
                                    apply_seconds);
  }
  restored_ = false;
  awaiting_pull_ = step_.workers();
  if (options_.checkpoint_every > 0 && store_.version() % options_.checkpoint_every == 0) {
    due_checkpoint_ = CheckpointLocked();
    checkpoint_pending_ = true;
    if (options_.on_checkpoint_due) options_.on_checkpoint_due();
  }
  push_buffers_->Recycle(step_.Open(store_.version()));
  if (members_) last_members_ = std::move(members_);
  members_.reset();
  version_cv_.notify_all();
}

// ---------------------------------------------------------------- ShardStatus

Status ShardMachine::ShardStatus(const v1::ShardStatusRequest& req,
                                 v1::ShardStatusResponse* resp) {
  LOCO_RETURN_IF_ERROR(CheckShardId(req.shard_id()));
  (void)EnsureRange();  // status is answered even before the range is known
  std::lock_guard<std::mutex> lock(mu_);
  resp->set_shard_id(options_.shard_id);
  resp->set_initialized(store_.initialized());
  resp->set_version(store_.version());
  if (range_) {
    resp->set_offset(range_->offset);
    resp->set_length(range_->length);
  }
  resp->set_pending_pushes(static_cast<uint32_t>(step_.size()));
  if (members_ && members_->step == store_.version()) {
    for (uint64_t id : members_->live) {
      if (!step_.Has(id) && !step_.Withdrew(id)) resp->add_awaiting(id);
    }
  }
  return Status::Ok();
}

}  // namespace loco

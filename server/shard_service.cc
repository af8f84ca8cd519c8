#include "server/shard_service.h"

#include <algorithm>
#include <cstring>

#include <grpcpp/support/method_handler.h>

#include "common/log.h"
#include "rpc/payload_bytes.h"
#include "rpc/rpc_status.h"
#include "server/owned_payload.h"
#include "server/push_assembler.h"
#include "server/shard_step.h"

namespace loco {
namespace {

std::string Num(uint64_t x) { return std::to_string(x); }

// Data bytes per wake-up of the pulls that wait for a step's answer in parts.
constexpr uint64_t kAnswerWakeBytes = 256 * 1024;

bool Contains(const std::vector<uint64_t>& sorted, uint64_t id) {
  return std::binary_search(sorted.begin(), sorted.end(), id);
}

}  // namespace

ShardService::ShardService(ShardServiceOptions options, CoordinatorClient* coordinator)
    : options_(options), coordinator_(coordinator), return_path_([&] {
        ReturnPathOptions r = options.return_path;
        r.threads = options.apply_threads;
        return r;
      }()) {
  // Pull keeps its place and its wire format; only its server-side handler
  // changes, to one that reads and writes bytes. gRPC's C++ API has no
  // synchronous raw unary handler, but a "streamed unary" one (one read, one
  // write; a plain unary call to the client) takes any message type, bytes
  // included. The generated service lists its methods in the proto's order.
  const auto* proto_service =
      v1::PullRequest::descriptor()->file()->FindServiceByName("ParameterServer");
  const int pull_index = proto_service->FindMethodByName("Pull")->index();
  MarkMethodStreamed(
      pull_index,
      new grpc::internal::StreamedUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
          [this](grpc::ServerContext* ctx,
                 grpc::ServerUnaryStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
            return PullRaw(ctx, stream);
          }));
  // PullStream likewise, as a "split streaming" handler (one read, many
  // writes): its chunks are slices of the shared body too.
  const int pull_stream_index = proto_service->FindMethodByName("PullStream")->index();
  MarkMethodStreamed(
      pull_stream_index,
      new grpc::internal::SplitServerStreamingHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
          [this](grpc::ServerContext* ctx,
                 grpc::ServerSplitStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
            return PullStreamRaw(ctx, stream);
          }));
}

Status ShardService::ValidateOptions(const ShardServiceOptions& o) {
  LOCO_RETURN_IF_ERROR(ValidateAdamWParams(o.hyper));
  LOCO_RETURN_IF_ERROR(ReturnPath::ValidateOptions(o.return_path));
  if (o.max_pull_wait.count() <= 0) return InvalidArgument("max pull wait must be > 0 ms");
  if (o.apply_threads < 1 || o.apply_threads > kMaxApplyThreads) {
    return InvalidArgument("apply threads must be in [1, " + std::to_string(kMaxApplyThreads) +
                           "], got " + std::to_string(o.apply_threads));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- gRPC edge

// Metrics are counted here, at the edge, from what actually crosses the wire.
grpc::Status ShardService::InitShard(grpc::ServerContext*, const v1::InitShardRequest* req,
                                     v1::InitShardResponse* resp) {
  Status s = DoInitShard(*req, resp);
  if (options_.metrics) options_.metrics->OnRejected("init_shard", s, nullptr);
  return ToGrpcStatus(s);
}
grpc::Status ShardService::StreamedPush(
    grpc::ServerContext*, grpc::ServerUnaryStreamer<v1::PushRequest, v1::PushResponse>* stream) {
  v1::PushRequest req;
  v1::PushResponse resp;
  if (!stream->Read(&req)) {
    const Status s = InvalidArgument("the push is not a serialized loco.v1.PushRequest");
    if (options_.metrics) options_.metrics->OnRejected("push", s, nullptr);
    return ToGrpcStatus(s);
  }
  Status s = PushAndCount(&req, &resp);
  if (s.ok()) stream->Write(resp, grpc::WriteOptions().set_last_message());
  return ToGrpcStatus(s);
}
grpc::Status ShardService::PushStream(grpc::ServerContext*,
                                      grpc::ServerReader<v1::PushChunk>* reader,
                                      v1::PushResponse* resp) {
  v1::PushRequest req;
  Status s = ReadPushStream(reader, &req);
  if (!s.ok()) {
    if (options_.metrics) options_.metrics->OnRejected("push", s, nullptr);
    return ToGrpcStatus(s);
  }
  return ToGrpcStatus(PushAndCount(&req, resp));
}
Status ShardService::PushAndCount(v1::PushRequest* req, v1::PushResponse* resp) {
  // Counted before DoPush takes the bytes.
  const uint64_t wire_bytes = ServerMetrics::WireBytes(req->gradient());
  const uint64_t length = req->gradient().length();
  Status s = DoPush(req, resp);
  if (options_.metrics) {
    if (s.ok() && !resp->duplicate()) options_.metrics->OnPushAccepted(wire_bytes, length);
    options_.metrics->OnRejected("push", s, &req->gradient());
  }
  return s;
}
grpc::Status ShardService::ShardStatus(grpc::ServerContext*, const v1::ShardStatusRequest* req,
                                       v1::ShardStatusResponse* resp) {
  Status s = DoShardStatus(*req, resp);
  if (options_.metrics) options_.metrics->OnRejected("shard_status", s, nullptr);
  return ToGrpcStatus(s);
}

// ---------------------------------------------------------------- checks

Status ShardService::CheckShardId(uint32_t shard_id) const {
  if (shard_id != options_.shard_id) {
    return NotFound("shard " + Num(shard_id) + " is not served here; this server holds shard " +
                    Num(options_.shard_id) + " (see the coordinator's shard map)");
  }
  return Status::Ok();
}

Status ShardService::CheckMember(uint64_t worker_id) const {
  if (worker_id == 0) {
    return InvalidArgument("worker_id 0 names no worker; Join the coordinator first and send "
                           "the id it assigns");
  }
  auto view = coordinator_->GetClusterView();
  if (!view.ok()) {
    return Unavailable("cannot check that worker " + Num(worker_id) + " is a member: " +
                       view.status().ToString() + "; retry");
  }
  const auto& ids = view->worker_ids();
  if (std::find(ids.begin(), ids.end(), worker_id) == ids.end()) {
    return FailedPrecondition("worker " + Num(worker_id) + " is not a member of the cluster "
                              "(unknown, left or expired); Join the coordinator first");
  }
  return Status::Ok();
}

Status ShardService::NotInitialized() const {
  return FailedPrecondition("shard " + Num(options_.shard_id) +
                            " is not initialised; a worker must call InitShard first");
}

Status ShardService::CheckStepLocked(uint64_t step) const {
  const uint64_t version = store_.version();
  if (step < version) {
    return FailedPrecondition("step " + Num(step) + " already applied (shard at version " +
                              Num(version) + "); pull and resynchronise");
  }
  if (step > version) {
    return FailedPrecondition("step " + Num(step) + " is ahead of the shard (version " +
                              Num(version) + ")");
  }
  return Status::Ok();
}

bool ShardService::IsParticipantLocked(uint64_t worker_id, uint64_t step) const {
  return members_ && members_->step == step && Contains(members_->participants, worker_id);
}

Status ShardService::EnsureRange() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (range_) return Status::Ok();
  }
  auto view = coordinator_->GetClusterView();
  if (!view.ok()) {
    return Unavailable("this shard's range is not known yet: " + view.status().ToString() +
                       "; retry");
  }
  const auto& map = view->shard_map();
  if (map.total_elements() == 0) {
    return Unavailable("this shard's range is not known yet: no worker has joined the "
                       "coordinator (the first Join fixes the model size); retry");
  }
  for (const auto& s : map.shards()) {
    if (s.shard_id() != options_.shard_id) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (!range_) {
      range_ = ShardRange{s.offset(), s.length()};
      LOG_INFO("shard " << options_.shard_id << " owns [" << s.offset() << ", "
                        << s.offset() + s.length() << ") of " << map.total_elements());
    }
    return Status::Ok();
  }
  return FailedPrecondition("the coordinator's shard map has no shard " +
                            Num(options_.shard_id) + " (it has " + Num(map.shards_size()) +
                            "); check --shard-id and the coordinator's --num-servers");
}

bool ShardService::range_known() const {
  std::lock_guard<std::mutex> lock(mu_);
  return range_.has_value();
}

// ---------------------------------------------------------------- InitShard

Status ShardService::DoInitShard(const v1::InitShardRequest& req, v1::InitShardResponse* resp) {
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
    if (store_.initialized()) {
      return AlreadyExists("shard " + Num(options_.shard_id) + " is already initialised (version " +
                           Num(store_.version()) + "); pull the parameters instead");
    }
  }
  LOCO_RETURN_IF_ERROR(CheckMember(req.worker_id()));

  std::lock_guard<std::mutex> lock(mu_);
  if (store_.initialized()) {
    return AlreadyExists("shard " + Num(options_.shard_id) + " is already initialised (version " +
                         Num(store_.version()) + "); pull the parameters instead");
  }
  LOCO_RETURN_IF_ERROR(store_.Initialize(range, std::move(values), 0));
  return_path_.Reset(store_.params(), store_.version());
  awaiting_pull_.clear();
  step_.Open(store_.version());
  members_.reset();
  if (options_.metrics) options_.metrics->OnStepOpened(store_.version());
  resp->set_version(store_.version());
  LOG_INFO("shard " << options_.shard_id << " initialised by worker " << req.worker_id() << " ("
                    << range.length << " parameters)");
  version_cv_.notify_all();
  return Status::Ok();
}

// ---------------------------------------------------------------- Push

Status ShardService::ReadPushStream(grpc::ServerReaderInterface<v1::PushChunk>* reader,
                                    v1::PushRequest* req) {
  // The bound needs the range; the shard id is the push's own check.
  LOCO_RETURN_IF_ERROR(EnsureRange());
  size_t max_data_bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    max_data_bytes = range_->length * sizeof(float);
  }
  PushAssembler assembler(max_data_bytes);
  v1::PushChunk chunk;
  while (reader->Read(&chunk)) {
    if (options_.metrics) options_.metrics->OnPushChunk();
    LOCO_RETURN_IF_ERROR(assembler.Add(&chunk));
  }
  auto assembled = assembler.Finish();
  if (!assembled.ok()) return assembled.status();
  *req = std::move(assembled).value();
  return Status::Ok();
}

Status ShardService::DoPush(v1::PushRequest* request, v1::PushResponse* resp) {
  const v1::PushRequest& req = *request;
  LOCO_RETURN_IF_ERROR(CheckShardId(req.shard_id()));
  LOCO_RETURN_IF_ERROR(EnsureRange());
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

  const uint64_t worker = req.worker_id();
  // A restored shard fast-forwards to a step ahead of it (see RestoreFrom),
  // but only for a participant of that step: otherwise any client could
  // move the shard's version to an arbitrary step.
  std::optional<v1::StepParticipantsResponse> ahead;
  if (fast_forward) {
    auto fetched = coordinator_->GetStepParticipants(req.step(), options_.shard_id, 0);
    if (!fetched.ok()) {
      return Unavailable("cannot learn the participants of step " + Num(req.step()) + ": " +
                         fetched.status().ToString() + "; retry the push");
    }
    const auto& ids = fetched->participants();
    if (std::find(ids.begin(), ids.end(), worker) == ids.end()) {
      return FailedPrecondition("worker " + Num(worker) + " is not a participant of step " +
                                Num(req.step()) + "; a restored shard only fast-forwards for a "
                                "participant of the step it is pushed");
    }
    ahead = std::move(fetched).value();
  }
  // At most two rounds: the cached participant set, then (if the worker is
  // not in it) one fresh answer from the coordinator.
  for (int round = 0; round < 2; ++round) {
    uint32_t pushes = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (restored_ && req.step() > store_.version()) {
        if (!ahead) return CheckStepLocked(req.step());  // restored since the check above
        FastForwardLocked(req.step());
        AdoptParticipantsLocked(*ahead);
      }
      LOCO_RETURN_IF_ERROR(CheckStepLocked(req.step()));
      resp->set_version(store_.version());
      if (step_.Has(worker)) {
        resp->set_duplicate(true);
        return Status::Ok();
      }
      if (IsParticipantLocked(worker, req.step())) {
        step_.Add(worker, std::move(payload).value());
        if (options_.metrics) options_.metrics->OnPushAdded(step_.size());
        // A worker pushes only once it holds the current version, so the
        // answers of this version are mostly sent: the next step's payloads
        // must not pile up beside them. This catches versions whose pullers
        // the server cannot know (after init or a restore: every joining
        // worker pulls a full fp32 copy); a late pull makes its answer again.
        return_path_.ReleaseRemakeableBodies();
        // The first step's moments, while the step waits for the other
        // pushes rather than inside its AdamW (a no-op after the first).
        (void)store_.AllocateMoments();  // initialised: checked above
        Status s = MaybeCompleteLocked();
        if (!s.ok()) LOG_ERROR("shard " << options_.shard_id << ": " << s.ToString());
        resp->set_version(store_.version());
        return Status::Ok();
      }
      if (round == 1) break;
      pushes = static_cast<uint32_t>(step_.size());
    }
    auto fetched = coordinator_->GetStepParticipants(req.step(), options_.shard_id, pushes);
    if (!fetched.ok()) {
      return Unavailable("cannot learn the participants of step " + Num(req.step()) + ": " +
                         fetched.status().ToString() + "; retry the push");
    }
    std::lock_guard<std::mutex> lock(mu_);
    AdoptParticipantsLocked(*fetched);
  }
  return FailedPrecondition("worker " + Num(worker) + " is not a participant of step " +
                            Num(req.step()) + " (it opened before the worker joined); pull "
                            "version " + Num(req.step() + 1));
}

void ShardService::AdoptParticipantsLocked(const v1::StepParticipantsResponse& fetched) {
  if (!store_.initialized() || fetched.step() != store_.version()) return;  // stale
  if (members_ && members_->step == fetched.step() && members_->epoch > fetched.epoch()) return;
  StepMembers m;
  m.step = fetched.step();
  m.epoch = fetched.epoch();
  m.participants.assign(fetched.participants().begin(), fetched.participants().end());
  m.live.assign(fetched.live().begin(), fetched.live().end());
  std::sort(m.participants.begin(), m.participants.end());
  std::sort(m.live.begin(), m.live.end());
  members_ = std::move(m);
}

Status ShardService::MaybeCompleteLocked() {
  if (!members_ || members_->step != store_.version()) return Status::Ok();
  if (checkpoint_pending_) return Status::Ok();  // CheckpointDone completes it
  if (!step_.CompleteFor(members_->live, options_.straggler_slack)) return Status::Ok();
  return ApplyStepLocked();
}

Status ShardService::ApplyStepLocked() {
  const uint64_t step = store_.version();
  const size_t length = store_.length();
  const auto t0 = std::chrono::steady_clock::now();
  LOCO_RETURN_IF_ERROR(step_.Validate(length).Annotate("step " + Num(step)));
  // Each piece of the answer (the return delta, or the bf16 copy) is
  // handed, as soon as it is encoded, to the pulls waiting for it in parts
  // (AnswerParts): the answer crosses the link while the rest of the step
  // computes.
  std::shared_ptr<AnswerParts> answer;
  if (next_answer_ && next_answer_->version() == step + 1) answer = next_answer_;
  next_answer_.reset();
  ShardStepHooks hooks;
  if (answer) {
    hooks.answer_begun = [&](const ReturnPath::AnswerBuffers& buffers) {
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
    hooks.piece_encoded = [&](size_t begin, size_t count) { answer->Publish(begin, count); };
  }
  ShardStepResult computed;
  const Status applied_ok = RunShardStep(store_, step_, return_path_, options_.hyper,
                                         options_.apply_threads, hooks, &computed);
  if (!applied_ok.ok()) {
    if (answer) answer->Abandon();
    return applied_ok.Annotate("step " + Num(step));
  }
  const ApplyStats& stats = computed.stats;
  const auto t2 = std::chrono::steady_clock::now();
  const auto t1 = t0 + std::chrono::nanoseconds(computed.decode_ns /
                                                static_cast<int64_t>(stats.threads));
  Status rp = return_path_.FinishAnswer(store_.params(), store_.version(),
                                       std::move(computed.answer));
  if (!rp.ok()) {
    if (answer) answer->Abandon();
    LOG_WARN("return path fell back to a full copy: " << rp.ToString());
  }
  const size_t received = step_.size();
  const size_t expected = members_ ? members_->participants.size() : 0;
  if (received < expected) {
    LOG_INFO("shard " << options_.shard_id << " step " << step << " completed with " << received
                      << " of " << expected << " participants (the others departed)");
  }
  if (options_.metrics) {
    options_.metrics->OnStepApplied(store_.version(), received, expected,
                                    std::chrono::duration<double>(t1 - t0).count(),
                                    std::chrono::duration<double>(t2 - t1).count());
  }
  restored_ = false;
  awaiting_pull_ = step_.workers();
  if (options_.checkpoint_every > 0 && store_.version() % options_.checkpoint_every == 0) {
    due_checkpoint_ = CheckpointLocked();
    checkpoint_pending_ = true;
    if (options_.on_checkpoint_due) options_.on_checkpoint_due();
  }
  step_.Open(store_.version());
  members_.reset();
  version_cv_.notify_all();
  return Status::Ok();
}

Status ShardService::RefreshParticipants() {
  uint64_t step = 0;
  uint32_t pushes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!store_.initialized() || step_.size() == 0) return Status::Ok();
    step = store_.version();
    pushes = static_cast<uint32_t>(step_.size());
  }
  auto fetched = coordinator_->GetStepParticipants(step, options_.shard_id, pushes);
  if (!fetched.ok()) return fetched.status();
  std::lock_guard<std::mutex> lock(mu_);
  AdoptParticipantsLocked(*fetched);
  return MaybeCompleteLocked();
}

// ---------------------------------------------------------------- ShardStatus

Status ShardService::DoShardStatus(const v1::ShardStatusRequest& req,
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
  return Status::Ok();
}

// ---------------------------------------------------------------- lifecycle

void ShardService::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  AbandonAnswerLocked();
  version_cv_.notify_all();
}

// ---------------------------------------------------------------- checkpoints

Status ShardService::RestoreFrom(ShardCheckpoint c) {
  if (c.shard_id != options_.shard_id) {
    return InvalidArgument("checkpoint of shard " + Num(c.shard_id) + " given to shard " +
                           Num(options_.shard_id));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (range_ && (range_->offset != c.range.offset || range_->length != c.range.length)) {
    return FailedPrecondition("the checkpoint covers [" + Num(c.range.offset) + ", " +
                              Num(c.range.offset + c.range.length) + ") but this shard owns [" +
                              Num(range_->offset) + ", " + Num(range_->offset + range_->length) +
                              ")");
  }
  LOCO_RETURN_IF_ERROR(store_.Restore(c.range, c.version, std::move(c.params), std::move(c.m),
                                      std::move(c.v)));
  range_ = c.range;
  return_path_.Restore(store_.params(), std::move(c.replica));
  AbandonAnswerLocked();
  awaiting_pull_.clear();
  step_.Open(store_.version());
  members_.reset();
  restored_ = true;
  version_cv_.notify_all();
  return Status::Ok();
}

void ShardService::FastForwardLocked(uint64_t step) {
  const uint64_t from = store_.version();
  if (!store_.FastForward(step).ok()) return;  // step > version: cannot fail
  LOG_WARN("shard " << options_.shard_id << " was restored at version " << from
                    << " and the cluster is at step " << step << ": fast-forwarding; the "
                    << (step - from) << " update(s) in between are lost on this shard"
                    << (step_.size() > 0 ? ", " + Num(step_.size()) + " push(es) for step " +
                                               Num(from) + " dropped"
                                         : std::string()));
  step_.Open(step);
  AbandonAnswerLocked();
  awaiting_pull_.clear();
  members_.reset();
  if (options_.metrics) options_.metrics->OnStepOpened(store_.version());
  version_cv_.notify_all();
}

ShardCheckpoint ShardService::CheckpointLocked() const {
  ShardCheckpoint c;
  c.shard_id = options_.shard_id;
  c.range = store_.range();
  c.version = store_.version();
  c.params = store_.params();
  c.m = store_.m();
  c.v = store_.v();
  if (c.m.empty()) {  // no step applied yet: the moments are zeros, not held
    c.m.assign(c.params.size(), 0.0f);
    c.v.assign(c.params.size(), 0.0f);
  }
  c.replica = return_path_.replica();
  return c;
}

std::optional<ShardCheckpoint> ShardService::CheckpointState() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!store_.initialized()) return std::nullopt;
  return CheckpointLocked();
}

void ShardService::CheckpointDone() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!checkpoint_pending_ || due_checkpoint_) return;  // nothing taken, or a newer one due
  checkpoint_pending_ = false;
  Status s = MaybeCompleteLocked();
  if (!s.ok()) LOG_ERROR("shard " << options_.shard_id << ": " << s.ToString());
}

std::optional<ShardCheckpoint> ShardService::TakeDueCheckpoint() {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<ShardCheckpoint> due = std::move(due_checkpoint_);
  due_checkpoint_.reset();
  return due;
}

ShardStore ShardService::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return store_;
}

std::vector<float> ShardService::ReturnReplica() const {
  std::lock_guard<std::mutex> lock(mu_);
  return return_path_.replica();
}

uint32_t ShardService::pending_pushes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint32_t>(step_.size());
}

}  // namespace loco

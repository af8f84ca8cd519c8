// ShardService: the loco.v1.ParameterServer gRPC service for one shard:
// initialisation, push aggregation, the optimizer step and pulls.
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
// * Nothing waits without a deadline: coordinator calls carry the client's
//   deadline; pulls wait at most min(wait_ms, max_pull_wait).
//
// * Pull is served as a raw method (bytes in, bytes out; the same wire format
//   as the generated one, so clients use the generated stub): its answer's
//   body goes out as slices of the version's shared copy
//   (PullResponseToWire) instead of being copied into a message and then
//   serialized, which held it twice per concurrent pull.
// * PullStream is served the same way, in chunks. A pull that waits for
//   the next version's answer (a delta, or the bf16 copy) takes each part
//   from the step as soon as it is encoded (AnswerParts, its own lock, taken under the shard's and
//   never the other way round) and sends it without the shard's lock.
//
// Thread-safe: one mutex guards the shard's state; coordinator calls are made
// without holding it. The CoordinatorClient must outlive the service.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/sync_stream.h>

#include "kernels/adamw.h"
#include "proto/loco.grpc.pb.h"
#include "server/answer_parts.h"
#include "server/checkpoint.h"
#include "server/coordinator_client.h"
#include "server/return_path.h"
#include "server/server_metrics.h"
#include "server/shard_store.h"
#include "server/step_aggregator.h"

namespace loco {

// The most threads ShardServiceOptions::apply_threads may ask for.
constexpr uint32_t kMaxApplyThreads = 64;

struct ShardServiceOptions {
  uint32_t shard_id = 0;
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
  ServerMetrics* metrics = nullptr;  // not owned; must outlive the service; null = none
};

class ShardService final
    : public v1::ParameterServer::WithStreamedUnaryMethod_Push<v1::ParameterServer::Service> {
 public:
  ShardService(ShardServiceOptions options, CoordinatorClient* coordinator);
  static Status ValidateOptions(const ShardServiceOptions& options);

  grpc::Status InitShard(grpc::ServerContext* ctx, const v1::InitShardRequest* req,
                         v1::InitShardResponse* resp) override;
  // Push as a "streamed unary" handler (a plain unary call to the client):
  // it reads the request into a message it owns, so the gradient's bytes
  // move into the open step instead of being copied.
  grpc::Status StreamedPush(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<v1::PushRequest, v1::PushResponse>* stream) override;
  // loco.v1.ParameterServer/Pull: reads a serialized PullRequest and writes
  // a serialized PullResponse (see PullResponseToWire).
  // loco.v1.ParameterServer/PushStream: the same push in chunks (see
  // PushAssembler), so that the transport holds one chunk, not the whole
  // push, beside the assembled payload.
  grpc::Status PushStream(grpc::ServerContext* ctx, grpc::ServerReader<v1::PushChunk>* reader,
                          v1::PushResponse* resp) override;
  grpc::Status PullRaw(grpc::ServerContext* ctx,
                       grpc::ServerUnaryStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* stream);
  // loco.v1.ParameterServer/PullStream: reads a serialized PullRequest and
  // writes serialized PullChunks (see DoPullStream).
  grpc::Status PullStreamRaw(
      grpc::ServerContext* ctx,
      grpc::ServerSplitStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* stream);
  grpc::Status ShardStatus(grpc::ServerContext* ctx, const v1::ShardStatusRequest* req,
                           v1::ShardStatusResponse* resp) override;

  Status DoInitShard(const v1::InitShardRequest& req, v1::InitShardResponse* resp);
  // Takes the gradient's bytes out of `*req` when the payload passes its
  // checks (the request is spent either way).
  Status DoPush(v1::PushRequest* req, v1::PushResponse* resp);
  // Reads a PushStream's chunks into one request. Refuses a malformed
  // stream at its first bad chunk; changes no state.
  Status ReadPushStream(grpc::ServerReaderInterface<v1::PushChunk>* reader,
                        v1::PushRequest* req);
  // Waits as the request asks, then fills `header` (every field but the
  // payload's bytes) and `body` (those bytes, shared; see ReturnPath).
  Status DoPull(const v1::PullRequest& req, v1::PullResponse* header,
                ReturnPath::SharedBody* body);
  // The same answer as one message (the body copied in).
  Status DoPull(const v1::PullRequest& req, v1::PullResponse* resp);
  // The answer DoPull gives, in chunks handed to `write` (serialized
  // PullChunks; false when the call is over). A pull for the next version
  // (have_version = version, min_version = version + 1, no want_full; the
  // delta or bf16 return path) that arrives before the step gets each part
  // of the answer as soon as the step has encoded it (see
  // AnswerParts); when that version turns out to be a full sync, or the
  // step does not begin within wait_ms, the plain answer follows. Every
  // other answer is sent as DoPull's body in chunks. `cancelled` says when
  // the caller went away. Sets the wire bytes and elements sent.
  Status DoPullStream(const v1::PullRequest& req, const std::function<bool()>& cancelled,
                      const std::function<bool(grpc::ByteBuffer)>& write,
                      uint64_t* wire_bytes, uint64_t* length);
  Status DoShardStatus(const v1::ShardStatusRequest& req, v1::ShardStatusResponse* resp);

  // Learns this shard's range from the coordinator's cluster view (once).
  // Unavailable until the coordinator is reachable and the model size fixed.
  Status EnsureRange();
  bool range_known() const;
  // Re-asks the coordinator for the open step's live participants when
  // pushes are pending, and completes the step if nobody else is awaited.
  Status RefreshParticipants();
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
  // DoPush, counted in the metrics as the RPC edge sees it (both push RPCs).
  Status PushAndCount(v1::PushRequest* req, v1::PushResponse* resp);

  struct StepMembers {
    uint64_t step = 0;
    uint64_t epoch = 0;
    std::vector<uint64_t> participants;  // ascending
    std::vector<uint64_t> live;          // ascending
  };

  Status CheckShardId(uint32_t shard_id) const;
  // OK when the coordinator lists `worker_id` as a current member (one
  // coordinator call; never under mu_).
  Status CheckMember(uint64_t worker_id) const;
  Status NotInitialized() const;
  Status CheckStepLocked(uint64_t step) const;
  bool IsParticipantLocked(uint64_t worker_id, uint64_t step) const;
  void AdoptParticipantsLocked(const v1::StepParticipantsResponse& fetched);
  // Completes the open step when every live participant pushed.
  Status MaybeCompleteLocked();
  Status ApplyStepLocked();
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

  const ShardServiceOptions options_;
  CoordinatorClient* const coordinator_;

  mutable std::mutex mu_;
  std::condition_variable version_cv_;  // signalled on init, step, Stop
  std::optional<ShardRange> range_;
  ShardStore store_;
  StepAggregator step_;
  std::optional<StepMembers> members_;  // the open step's participants, once fetched
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

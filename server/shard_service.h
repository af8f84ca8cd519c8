// ShardService: the loco.v1.ParameterServer gRPC service for one shard, a
// thin adapter over ShardMachine (the shard's state and its rules: see
// server/shard_machine.h for the contracts of initialisation, pushes, the
// step and pulls). It reads and parses the calls, asks the machine, converts
// its Status to a grpc::Status at the edge (rpc/rpc_status.h), writes the
// answers and counts in the metrics what crosses the wire.
//
// * Pull is served as a raw method (bytes in, bytes out; the same wire format
//   as the generated one, so clients use the generated stub): its answer's
//   body goes out as slices of the version's shared copy
//   (PullResponseToWire) instead of being copied into a message and then
//   serialized, which held it twice per concurrent pull.
// * PullStream is served the same way, in chunks. A pull that waits for
//   the next version's answer (a delta, or the bf16 copy) takes each part
//   from the step as soon as it is encoded (ShardMachine::NextAnswerFor,
//   AnswerParts) and sends it without the shard's lock.
// * A pull never outwaits its caller: its wait is bounded by the call's
//   deadline as well as by max_pull_wait.
//
// * Roles (docs/DESIGN.md §10): InitShard, Push, PushStream, Pull and
//   PullStream are for the worker role; a call without it gets
//   PERMISSION_DENIED before anything is read from it (counted in the
//   rejection metric). ShardStatus is for any authenticated caller.
// * Tickets: the same calls act for the worker id they name only with that
//   worker's ticket (TicketCheck's rules), checked once the request (a
//   stream's first chunk) is read and before anything else is.
//
// Thread-safe (ShardMachine is) once SetRolePolicy, if called, has been
// called before serving; LearnTicketKey may be called at any time. The
// CoordinatorClient must outlive the service.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/sync_stream.h>

#include "proto/loco.grpc.pb.h"
#include "security/caller_role.h"
#include "server/answer_parts.h"
#include "server/checkpoint.h"
#include "server/coordinator_client.h"
#include "server/membership_source.h"
#include "server/return_path.h"
#include "server/shard_machine.h"
#include "server/shard_store.h"
#include "server/ticket_check.h"

namespace loco {

// The service's options are the shard's (ShardMachineOptions).
using ShardServiceOptions = ShardMachineOptions;

class ShardService final
    : public v1::ParameterServer::WithStreamedUnaryMethod_Push<v1::ParameterServer::Service> {
 public:
  ShardService(ShardServiceOptions options, CoordinatorClient* coordinator);
  static Status ValidateOptions(const ShardServiceOptions& options) {
    return ShardMachine::ValidateOptions(options);
  }

  // Who may call what (null = not checked). Call before serving. With
  // separated roles, shard calls must carry their worker's ticket.
  void SetRolePolicy(std::shared_ptr<const RolePolicy> roles);
  // The coordinator's ticket key, from a registration (see TicketCheck::Learn).
  [[nodiscard]] Status LearnTicketKey(const std::string& key) { return tickets_->Learn(key); }
  bool tickets_required() const { return tickets_->required(); }
  // See TicketCheck::TakeKeyWanted.
  bool TakeTicketKeyWanted() { return tickets_->TakeKeyWanted(); }

  grpc::Status InitShard(grpc::ServerContext* ctx, const v1::InitShardRequest* req,
                         v1::InitShardResponse* resp) override;
  // Push as a "streamed unary" handler (a plain unary call to the client):
  // it reads the request into a message it owns, so the gradient's bytes
  // move into the open step instead of being copied.
  grpc::Status StreamedPush(
      grpc::ServerContext* ctx,
      grpc::ServerUnaryStreamer<v1::PushRequest, v1::PushResponse>* stream) override;
  // loco.v1.ParameterServer/PushStream: the same push in chunks (see
  // PushAssembler), so that the transport holds one chunk, not the whole
  // push, beside the assembled payload.
  grpc::Status PushStream(grpc::ServerContext* ctx, grpc::ServerReader<v1::PushChunk>* reader,
                          v1::PushResponse* resp) override;
  // loco.v1.ParameterServer/Pull: reads a serialized PullRequest and writes
  // a serialized PullResponse (see PullResponseToWire).
  grpc::Status PullRaw(grpc::ServerContext* ctx,
                       grpc::ServerUnaryStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* stream);
  // loco.v1.ParameterServer/PullStream: reads a serialized PullRequest and
  // writes serialized PullChunks (see DoPullStream).
  grpc::Status PullStreamRaw(
      grpc::ServerContext* ctx,
      grpc::ServerSplitStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* stream);
  grpc::Status ShardStatus(grpc::ServerContext* ctx, const v1::ShardStatusRequest* req,
                           v1::ShardStatusResponse* resp) override;

  // The calls without the wire (ShardMachine's; see there), for the
  // owner (ParameterServer), the fuzzer and tests.
  Status DoInitShard(const v1::InitShardRequest& req, v1::InitShardResponse* resp) {
    return shard_.InitShard(req, resp);
  }
  Status DoPush(v1::PushRequest* req, v1::PushResponse* resp) { return shard_.Push(req, resp); }
  Status DoPull(const v1::PullRequest& req, v1::PullResponse* header,
                ReturnPath::SharedBody* body) {
    return shard_.Pull(req, header, body);
  }
  Status DoPull(const v1::PullRequest& req, v1::PullResponse* resp) {
    return shard_.Pull(req, resp);
  }
  Status DoShardStatus(const v1::ShardStatusRequest& req, v1::ShardStatusResponse* resp) {
    return shard_.ShardStatus(req, resp);
  }
  Status EnsureRange() { return shard_.EnsureRange(); }
  bool range_known() const { return shard_.range_known(); }
  Status ConfirmRestoredRange() { return shard_.ConfirmRestoredRange(); }
  bool range_unconfirmed() const { return shard_.range_unconfirmed(); }
  Status RefreshParticipants() { return shard_.RefreshParticipants(); }
  void FillRegistration(v1::RegisterServerRequest* req) const { shard_.FillRegistration(req); }
  void Stop() { shard_.Stop(); }
  Status RestoreFrom(ShardCheckpoint checkpoint) {
    return shard_.RestoreFrom(std::move(checkpoint));
  }
  std::optional<ShardCheckpoint> CheckpointState() const { return shard_.CheckpointState(); }
  std::optional<ShardCheckpoint> TakeDueCheckpoint() { return shard_.TakeDueCheckpoint(); }
  void CheckpointDone() { shard_.CheckpointDone(); }
  ShardStore Snapshot() const { return shard_.Snapshot(); }
  std::vector<float> ReturnReplica() const { return shard_.ReturnReplica(); }
  uint32_t pending_pushes() const { return shard_.pending_pushes(); }

 private:
  // The shard's questions to the coordinator, asked over the CoordinatorClient.
  class CoordinatorMembership final : public MembershipSource {
   public:
    explicit CoordinatorMembership(CoordinatorClient* coordinator) : coordinator_(coordinator) {}
    StatusOr<v1::ClusterView> GetClusterView() override;
    StatusOr<v1::StepParticipantsResponse> GetStepParticipants(
        uint64_t step, uint32_t shard_id, uint32_t pushes_received) override;

   private:
    CoordinatorClient* const coordinator_;
  };

  ServerMetrics* metrics() const { return shard_.options().metrics; }
  // OK when the call holds the worker role; else the refusal (naming `rpc`),
  // counted under `metric_rpc` in the metrics.
  Status CheckWorkerRole(const grpc::ServerContext* ctx, const char* rpc,
                         const char* metric_rpc) const;
  // OK when the call may act as `worker_id` (TicketCheck); else the
  // refusal, counted under `metric_rpc`.
  Status CheckTicket(uint64_t worker_id, const std::string& ticket, const char* rpc,
                     const char* metric_rpc) const;
  // Registers Pull and PullStream as raw (bytes in, bytes out) handlers.
  void ServePullsRaw();
  // The machine's Push, counted in the metrics as the RPC edge sees it
  // (both push RPCs).
  Status PushAndCount(v1::PushRequest* req, v1::PushResponse* resp);
  // Reads a PushStream's chunks into one request. Refuses a malformed
  // stream at its first bad chunk; changes no state.
  Status ReadPushStream(grpc::ServerReaderInterface<v1::PushChunk>* reader,
                        v1::PushRequest* req);

  // The answer ShardMachine::Pull gives, in chunks handed to `write`
  // (serialized PullChunks; false when the call is over). A pull for the
  // next version that arrives before the step gets each part of the answer
  // as soon as the step has encoded it (see ShardMachine::NextAnswerFor);
  // when that version turns out to be a full sync, or the step does not
  // begin within wait_ms, the plain answer follows. Every other answer is
  // sent as Pull's body in chunks. `cancelled` says when the caller went
  // away. Sets the wire bytes and elements sent.
  Status DoPullStream(const v1::PullRequest& req, const std::function<bool()>& cancelled,
                      const std::function<bool(grpc::ByteBuffer)>& write,
                      uint64_t* wire_bytes, uint64_t* length);
  // DoPullStream's phases. SendAnswerParts: true once the whole answer went
  // out in parts; false when the plain path must answer (nothing sent yet).
  StatusOr<bool> SendAnswerParts(AnswerParts& answer, uint64_t worker_id,
                                 std::chrono::steady_clock::time_point deadline,
                                 const std::function<bool()>& cancelled,
                                 const std::function<bool(grpc::ByteBuffer)>& write,
                                 uint64_t* wire_bytes, uint64_t* length);
  // Writes the freshly published parts (adjacent ones merged into one chunk).
  Status WriteParts(const AnswerParts& answer, std::vector<AnswerParts::Part>* fresh,
                    const std::function<bool(grpc::ByteBuffer)>& write, bool* header_sent,
                    uint64_t* sent, uint64_t* wire_bytes);
  Status SendWholeAnswer(const v1::PullRequest& req,
                         std::chrono::steady_clock::time_point deadline,
                         const std::function<bool(grpc::ByteBuffer)>& write,
                         uint64_t* wire_bytes, uint64_t* length);

  CoordinatorMembership membership_;
  ShardMachine shard_;
  std::shared_ptr<const RolePolicy> roles_;  // set before serving; null = not checked
  // Replaced only by SetRolePolicy, before serving.
  std::unique_ptr<TicketCheck> tickets_ = std::make_unique<TicketCheck>(/*required=*/false);
};

}  // namespace loco

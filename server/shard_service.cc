#include "server/shard_service.h"

#include <grpcpp/support/method_handler.h>

#include "rpc/rpc_status.h"
#include "security/call_identity.h"
#include "server/push_assembler.h"

namespace loco {

StatusOr<v1::ClusterView> ShardService::CoordinatorMembership::GetClusterView() {
  return coordinator_->GetClusterView();
}

StatusOr<v1::StepParticipantsResponse>
ShardService::CoordinatorMembership::GetStepParticipants(uint64_t step, uint32_t shard_id,
                                                         uint32_t pushes_received) {
  return coordinator_->GetStepParticipants(step, shard_id, pushes_received);
}

ShardService::ShardService(ShardServiceOptions options, CoordinatorClient* coordinator)
    : membership_(coordinator), shard_(std::move(options), &membership_) {
  ServePullsRaw();
}

void ShardService::ServePullsRaw() {
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

void ShardService::SetRolePolicy(std::shared_ptr<const RolePolicy> roles) {
  roles_ = std::move(roles);
  tickets_ = std::make_unique<TicketCheck>(/*required=*/roles_ && roles_->separated());
}

Status ShardService::CheckTicket(uint64_t worker_id, const std::string& ticket, const char* rpc,
                                 const char* metric_rpc) const {
  Status s = tickets_->Check(worker_id, ticket, rpc);
  if (!s.ok() && metrics()) metrics()->OnRejected(metric_rpc, s, nullptr);
  return s;
}

Status ShardService::CheckWorkerRole(const grpc::ServerContext* ctx, const char* rpc,
                                     const char* metric_rpc) const {
  if (!roles_ || ctx == nullptr) return Status::Ok();
  Status s = AuthorizeRole(IdentifyCaller(*ctx, roles_.get()), CallerRole::kWorker, rpc);
  if (!s.ok() && metrics()) metrics()->OnRejected(metric_rpc, s, nullptr);
  return s;
}

// Metrics are counted here, at the edge, from what actually crosses the wire.
grpc::Status ShardService::InitShard(grpc::ServerContext* ctx, const v1::InitShardRequest* req,
                                     v1::InitShardResponse* resp) {
  if (Status allowed = CheckWorkerRole(ctx, "InitShard", "init_shard"); !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  if (Status own = CheckTicket(req->worker_id(), req->ticket(), "InitShard", "init_shard");
      !own.ok()) {
    return ToGrpcStatus(own);
  }
  Status s = shard_.InitShard(*req, resp);
  if (metrics()) metrics()->OnRejected("init_shard", s, nullptr);
  return ToGrpcStatus(s);
}

grpc::Status ShardService::StreamedPush(
    grpc::ServerContext* ctx, grpc::ServerUnaryStreamer<v1::PushRequest, v1::PushResponse>* stream) {
  if (Status allowed = CheckWorkerRole(ctx, "Push", "push"); !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  v1::PushRequest req;
  v1::PushResponse resp;
  if (!stream->Read(&req)) {
    const Status s = InvalidArgument("the push is not a serialized loco.v1.PushRequest");
    if (metrics()) metrics()->OnRejected("push", s, nullptr);
    return ToGrpcStatus(s);
  }
  if (Status own = CheckTicket(req.worker_id(), req.ticket(), "Push", "push"); !own.ok()) {
    return ToGrpcStatus(own);
  }
  Status s = PushAndCount(&req, &resp);
  if (s.ok()) stream->Write(resp, grpc::WriteOptions().set_last_message());
  return ToGrpcStatus(s);
}

grpc::Status ShardService::PushStream(grpc::ServerContext* ctx,
                                      grpc::ServerReader<v1::PushChunk>* reader,
                                      v1::PushResponse* resp) {
  if (Status allowed = CheckWorkerRole(ctx, "PushStream", "push"); !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  v1::PushRequest req;
  Status s = ReadPushStream(reader, &req);
  if (!s.ok()) {
    if (metrics()) metrics()->OnRejected("push", s, nullptr);
    return ToGrpcStatus(s);
  }
  return ToGrpcStatus(PushAndCount(&req, resp));
}

Status ShardService::PushAndCount(v1::PushRequest* req, v1::PushResponse* resp) {
  // Counted before Push takes the bytes.
  const uint64_t wire_bytes = ServerMetrics::WireBytes(req->gradient());
  const uint64_t length = req->gradient().length();
  Status s = shard_.Push(req, resp);
  if (metrics()) {
    // A withdrawal (no payload) is counted by the shard as one.
    if (s.ok() && !resp->duplicate() && !req->withdraw()) {
      metrics()->OnPushAccepted(wire_bytes, length);
    }
    metrics()->OnRejected("push", s, &req->gradient());
  }
  return s;
}

Status ShardService::ReadPushStream(grpc::ServerReaderInterface<v1::PushChunk>* reader,
                                    v1::PushRequest* req) {
  v1::PushChunk chunk;
  if (!reader->Read(&chunk)) return InvalidArgument("the push stream carried no chunk");
  if (metrics()) metrics()->OnPushChunk();
  // Before anything else: a push for another worker's id is refused at its
  // first chunk (one without a header is the assembler's to refuse).
  if (chunk.has_header()) {
    LOCO_RETURN_IF_ERROR(
        tickets_->Check(chunk.header().worker_id(), chunk.header().ticket(), "PushStream"));
  }
  // The bound needs the range; the shard id is the push's own check.
  LOCO_RETURN_IF_ERROR(shard_.EnsureRange());
  const size_t max_data_bytes = shard_.range()->length * sizeof(float);
  PushAssembler assembler(max_data_bytes, &shard_.push_buffers());
  for (;;) {
    LOCO_RETURN_IF_ERROR(assembler.Add(&chunk));
    if (!reader->Read(&chunk)) break;
    if (metrics()) metrics()->OnPushChunk();
  }
  auto assembled = assembler.Finish();
  if (!assembled.ok()) return assembled.status();
  *req = std::move(assembled).value();
  return Status::Ok();
}

grpc::Status ShardService::ShardStatus(grpc::ServerContext*, const v1::ShardStatusRequest* req,
                                       v1::ShardStatusResponse* resp) {
  Status s = shard_.ShardStatus(*req, resp);
  if (metrics()) metrics()->OnRejected("shard_status", s, nullptr);
  return ToGrpcStatus(s);
}

}  // namespace loco

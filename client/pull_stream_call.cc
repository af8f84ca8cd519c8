#include "client/pull_stream_call.h"

#include <grpcpp/impl/rpc_method.h>

#include "proto/loco.grpc.pb.h"
#include "rpc/rpc_status.h"

namespace loco {

PullStreamCall::PullStreamCall(const std::shared_ptr<grpc::Channel>& channel,
                               const v1::PullRequest& req,
                               std::chrono::system_clock::time_point deadline) {
  ctx_.set_deadline(deadline);
  // What the generated stub does, with a ByteBuffer (whose serialization
  // traits take the received slices as they are) for each chunk.
  static const std::string kMethod =
      "/" + std::string(v1::ParameterServer::service_full_name()) + "/PullStream";
  const grpc::internal::RpcMethod method(kMethod.c_str(),
                                         grpc::internal::RpcMethod::SERVER_STREAMING, channel);
  reader_.reset(grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
      channel.get(), method, &ctx_, req));
}

PullStreamCall::~PullStreamCall() {
  if (finished_) return;
  ctx_.TryCancel();
  (void)reader_->Finish();
}

Status PullStreamCall::ReadAll(uint64_t max_length, PulledParts* parts) {
  parts->Reset(max_length);
  grpc::ByteBuffer chunk;
  Status malformed = Status::Ok();
  while (reader_->Read(&chunk)) {
    malformed = parts->Add(chunk);
    chunk.Clear();
    if (!malformed.ok()) {
      ctx_.TryCancel();
      break;
    }
  }
  const grpc::Status s = reader_->Finish();
  finished_ = true;
  if (!malformed.ok()) return malformed;
  LOCO_RETURN_IF_ERROR(FromGrpcStatus(s));
  return parts->Finish();
}

}  // namespace loco

#include "client/pull_bytes.h"

#include <grpcpp/impl/client_unary_call.h>

#include "proto/loco.grpc.pb.h"

namespace loco {

PullBytesClient::PullBytesClient(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)),
      name_("/" + std::string(v1::ParameterServer::service_full_name()) + "/Pull"),
      method_(name_.c_str(), grpc::internal::RpcMethod::NORMAL_RPC, channel_) {}

grpc::Status PullBytesClient::Pull(grpc::ClientContext* ctx, const v1::PullRequest& req,
                                   grpc::ByteBuffer* answer) {
  // What the generated stub does, with a ByteBuffer (whose serialization
  // traits take the received slices as they are) for the response.
  return grpc::internal::BlockingUnaryCall<v1::PullRequest, grpc::ByteBuffer,
                                           grpc::protobuf::MessageLite, grpc::ByteBuffer>(
      channel_.get(), method_, ctx, req, answer);
}

}  // namespace loco

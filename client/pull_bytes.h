// PullBytesClient: a client's side of ParameterServer.Pull that leaves the
// answer in gRPC's receive buffer (a grpc::ByteBuffer, read by
// client/pulled_response.h) instead of parsing it into a v1::PullResponse,
// which would copy its body out of the buffer.
//
// The call on the wire is the generated stub's Pull (same method, same
// request, same bytes back); only the answer is not deserialized. Thread
// safety: as the generated stub's, calls may run on several threads.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include "proto/loco.pb.h"

namespace loco {

class PullBytesClient {
 public:
  explicit PullBytesClient(std::shared_ptr<grpc::Channel> channel);

  // Blocks until the call ends or `ctx`'s deadline passes.
  grpc::Status Pull(grpc::ClientContext* ctx, const v1::PullRequest& req,
                    grpc::ByteBuffer* answer);

  // "/loco.v1.ParameterServer/Pull".
  const std::string& method_name() const { return name_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::string name_;  // outlives method_, which points at it
  grpc::internal::RpcMethod method_;
};

}  // namespace loco

// PullStreamCall: a client's side of ParameterServer.PullStream (see
// v1::PullChunk), opened early: the constructor sends the request, so the
// server starts waiting for the version (and sends its parts as they are
// made) while the caller is still computing and pushing; ReadAll then
// takes the answer. The chunks are read as gRPC received them (byte
// buffers, not parsed messages) and copied once, into place
// (PulledParts).
//
// Not thread-safe: one thread drives a call. The destructor cancels a call
// that was not read.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/sync_stream.h>

#include "common/status.h"
#include "proto/loco.pb.h"
#include "client/pulled_parts.h"

namespace loco {

class PullStreamCall {
 public:
  // `deadline` bounds all of the call.
  PullStreamCall(const std::shared_ptr<grpc::Channel>& channel, const v1::PullRequest& req,
                 std::chrono::system_clock::time_point deadline);
  ~PullStreamCall();
  PullStreamCall(const PullStreamCall&) = delete;
  PullStreamCall& operator=(const PullStreamCall&) = delete;

  // Reads every chunk into *parts (reset for a shard of `max_length`
  // elements) and ends the call. The call's status; a malformed stream
  // cancels the call and returns InvalidArgument or DataLoss. Call once.
  [[nodiscard]] Status ReadAll(uint64_t max_length, PulledParts* parts);
  // The call's context, to cancel it from another thread (StepAbort).
  grpc::ClientContext* context() { return &ctx_; }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader_;
  bool finished_ = false;
};

}  // namespace loco

// SendPushInChunks: a client's side of ParameterServer.PushStream: sends
// `req` as a PushChunk stream whose chunks carry at most `chunk_bytes` of
// the gradient's data each (the first also carries the request without
// the data), so that the server's transport never holds the whole push.
//
// The chunks go out as gRPC byte buffers in PushChunk's wire format whose
// data slices point into `req`'s own data: the gradient is not copied into
// chunk messages nor serialized again. `req` must therefore stay unchanged
// until the call returns (the call has then sent or dropped every chunk).
//
// The answer and the errors are those of a unary Push of `req`. When the
// server ends the call early (it refused a chunk), the rest is not sent and
// the server's status is returned. Precondition: chunk_bytes > 0. Blocks
// until the call ends or `ctx`'s deadline passes.
#pragma once

#include <cstddef>
#include <memory>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>
#include <grpcpp/support/sync_stream.h>

#include "proto/loco.pb.h"

namespace loco {

// What both push-stream writers (SendPushInChunks, PlacedPushStream in
// client/placed_push_stream.h) share: the PushStream call opened for byte
// buffers, as the generated stub's PushStream opens it, and the request's
// header: every field but the gradient's data (the hyper-parameters
// included), and its scales only when `with_scales`, set one by one rather
// than copying the request's bulk.
std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> OpenPushStream(
    const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* ctx,
    v1::PushResponse* resp);
v1::PushRequest PushStreamHeader(const v1::PushRequest& req, bool with_scales);

grpc::Status SendPushInChunks(const std::shared_ptr<grpc::Channel>& channel,
                              grpc::ClientContext* ctx, const v1::PushRequest& req,
                              size_t chunk_bytes, v1::PushResponse* resp);

}  // namespace loco

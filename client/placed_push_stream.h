// PlacedPushStream: a client's side of a placed ParameterServer.PushStream
// (proto/loco.proto, PushChunk): the call opens with the request's header,
// then each part of the gradient goes out as soon as the caller has encoded
// it, in whatever order, and the server puts it in place. A worker uses it
// to send the end of a shard while the backward pass is still computing the
// beginning.
//
// Zero-copy: each chunk's data and scales are gRPC slices that point into
// `req`'s own buffers. `req`'s gradient data and scales must therefore keep
// their size (no reallocation) from the constructor until Finish returns,
// and the bytes of a part must be final before that part is written.
//
// Usage: construct (writes the header), Write each part once, Finish. The
// parts must not overlap and must cover the data and the scales by Finish,
// or the server refuses the push (INVALID_ARGUMENT) and changes nothing.
//
// Not thread-safe: one thread drives a stream. Blocks in Write while the
// transport's flow control holds the chunk, and in Finish until the call
// ends or `ctx`'s deadline passes.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>
#include <grpcpp/support/sync_stream.h>

#include "proto/loco.pb.h"

namespace loco {

class PlacedPushStream {
 public:
  // Opens the call; the first Write sends the header with its part. `req`
  // names the worker, shard and step, and its gradient has every field set
  // and its data and scales sized (their bytes may still be unwritten).
  // `resp` receives the server's answer at Finish.
  PlacedPushStream(const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* ctx,
                   const v1::PushRequest& req, v1::PushResponse* resp);
  ~PlacedPushStream();
  PlacedPushStream(const PlacedPushStream&) = delete;
  PlacedPushStream& operator=(const PlacedPushStream&) = delete;

  // Sends bytes [data_offset, data_offset + data_bytes) of the gradient's
  // data and [scales_offset, scales_offset + scales_bytes) of its scales as
  // one chunk. False when the call is over (the server refused a chunk, the
  // deadline passed, the connection broke): Finish says why, and later
  // writes are not sent. Precondition: the ranges lie inside the buffers.
  bool Write(size_t data_offset, size_t data_bytes, size_t scales_offset, size_t scales_bytes);
  // Ends the stream and waits for the server's answer. Call once.
  grpc::Status Finish();

 private:
  const v1::PushRequest& req_;
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer_;
  std::string header_;  // the first chunk's header and `placed`, until written
  bool broken_ = false;
};

}  // namespace loco

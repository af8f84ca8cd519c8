// SendPushInChunks: a client's side of ParameterServer.PushStream: sends
// `req` as a PushChunk stream whose chunks carry at most `chunk_bytes` of
// the gradient's data each (the first also carries the request without
// the data), so that the server's transport never holds the whole push.
//
// The answer and the errors are those of a unary Push of `req`. When the
// server ends the call early (it refused a chunk), the rest is not sent and
// the server's status is returned. Precondition: chunk_bytes > 0. Blocks
// until the call ends or `ctx`'s deadline passes.
#pragma once

#include <cstddef>

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include "proto/loco.grpc.pb.h"

namespace loco {

grpc::Status SendPushInChunks(v1::ParameterServer::StubInterface& stub, grpc::ClientContext* ctx,
                              const v1::PushRequest& req, size_t chunk_bytes,
                              v1::PushResponse* resp);

}  // namespace loco

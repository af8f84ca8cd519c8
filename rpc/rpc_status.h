// Conversion between loco::Status and grpc::Status: the only place where the
// two meet. RPC handlers and clients work in loco::Status and convert at the
// RPC edge; server and worker share this one mapping.
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace loco {

grpc::Status ToGrpcStatus(const Status& status);

// Keeps the code, so that callers can tell UNAVAILABLE from
// FAILED_PRECONDITION. gRPC codes without a loco counterpart (CANCELLED,
// UNKNOWN) become kInternal: never kAborted, which the worker reserves for
// "the push may have been lost, push again". Add context with Annotate().
Status FromGrpcStatus(const grpc::Status& status);

}  // namespace loco

// Conversion between loco::Status and grpc::Status: the only place where the
// two meet. RPC handlers work in loco::Status and convert at the edge.
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace loco {

grpc::Status ToGrpcStatus(const Status& status);
Status FromGrpcStatus(const grpc::Status& status);

}  // namespace loco

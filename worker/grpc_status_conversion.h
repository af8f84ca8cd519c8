// Converts a grpc::Status received by the worker into a loco::Status, keeping
// the code (so callers can tell UNAVAILABLE from FAILED_PRECONDITION) and
// prefixing the message with what was being done.
#pragma once

#include <string>

#include <grpcpp/grpcpp.h>

#include "common/status.h"

namespace loco {

Status StatusFromGrpc(const grpc::Status& s, const std::string& context);

}  // namespace loco

#include "worker/grpc_status_conversion.h"

namespace loco {
namespace {

StatusCode CodeFromGrpc(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::OK: return StatusCode::kOk;
    case grpc::StatusCode::INVALID_ARGUMENT: return StatusCode::kInvalidArgument;
    case grpc::StatusCode::FAILED_PRECONDITION: return StatusCode::kFailedPrecondition;
    case grpc::StatusCode::OUT_OF_RANGE: return StatusCode::kOutOfRange;
    case grpc::StatusCode::NOT_FOUND: return StatusCode::kNotFound;
    case grpc::StatusCode::ALREADY_EXISTS: return StatusCode::kAlreadyExists;
    case grpc::StatusCode::UNAVAILABLE: return StatusCode::kUnavailable;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return StatusCode::kDeadlineExceeded;
    case grpc::StatusCode::PERMISSION_DENIED: return StatusCode::kPermissionDenied;
    case grpc::StatusCode::UNAUTHENTICATED: return StatusCode::kUnauthenticated;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return StatusCode::kResourceExhausted;
    case grpc::StatusCode::UNIMPLEMENTED: return StatusCode::kUnimplemented;
    case grpc::StatusCode::DATA_LOSS: return StatusCode::kDataLoss;
    case grpc::StatusCode::ABORTED: return StatusCode::kAborted;
    default: return StatusCode::kInternal;
  }
}

}  // namespace

Status StatusFromGrpc(const grpc::Status& s, const std::string& context) {
  if (s.ok()) return Status::Ok();
  return Status(CodeFromGrpc(s.error_code()), context + ": " + s.error_message());
}

}  // namespace loco

#include "worker/pull_stream_call.h"

#include "proto/rpc_status.h"

namespace loco {

PullStreamCall::PullStreamCall(v1::ParameterServer::Stub* stub, const v1::PullRequest& req,
                               std::chrono::system_clock::time_point deadline) {
  ctx_.set_deadline(deadline);
  reader_ = stub->PullStream(&ctx_, req);
}

PullStreamCall::~PullStreamCall() {
  if (finished_) return;
  ctx_.TryCancel();
  (void)reader_->Finish();
}

Status PullStreamCall::ReadAll(uint64_t max_length, PulledParts* parts) {
  parts->Reset(max_length);
  v1::PullChunk chunk;
  Status malformed = Status::Ok();
  while (reader_->Read(&chunk)) {
    malformed = parts->Add(chunk);
    if (!malformed.ok()) {
      ctx_.TryCancel();
      break;
    }
  }
  const grpc::Status s = reader_->Finish();
  finished_ = true;
  if (!malformed.ok()) return malformed;
  LOCO_RETURN_IF_ERROR(FromGrpcStatus(s));
  return parts->Finish();
}

}  // namespace loco

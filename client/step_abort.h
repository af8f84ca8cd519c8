// StepAbort: ends one worker's step on every shard once a shard has refused
// its push for good (INVALID_ARGUMENT: hyper-parameters that disagree with
// the ones the step's first push fixed, say). The step cannot complete for
// this worker then, and its other shards' pulls may be waiting for a push
// that another worker had refused there: they are cancelled at once,
// instead of waiting until step_timeout_ms.
//
// Thread-safe: the shard threads of one step share one.
#pragma once

#include <mutex>
#include <vector>

#include <grpcpp/client_context.h>

#include "common/status.h"

namespace loco {

class StepAbort {
 public:
  // The first call wins (its reason is kept); cancels every registered call.
  void Abort(const Status& why);
  bool aborted() const;
  // Why the step was aborted; OK while it was not.
  Status reason() const;

  // While registered, `ctx` (not owned) is cancelled when the step is
  // aborted, at once if it already was. Unregister before destroying it.
  void Register(grpc::ClientContext* ctx);
  void Unregister(grpc::ClientContext* ctx);

 private:
  mutable std::mutex mu_;
  Status why_;
  bool aborted_ = false;
  std::vector<grpc::ClientContext*> calls_;
};

// Registers a call for its scope; does nothing for a null abort or context.
class StepAbortScope {
 public:
  StepAbortScope(StepAbort* abort, grpc::ClientContext* ctx) : abort_(abort), ctx_(ctx) {
    if (abort_ != nullptr && ctx_ != nullptr) abort_->Register(ctx_);
  }
  ~StepAbortScope() {
    if (abort_ != nullptr && ctx_ != nullptr) abort_->Unregister(ctx_);
  }
  StepAbortScope(const StepAbortScope&) = delete;
  StepAbortScope& operator=(const StepAbortScope&) = delete;

 private:
  StepAbort* abort_;
  grpc::ClientContext* ctx_;
};

}  // namespace loco

#include "client/step_abort.h"

#include <algorithm>

namespace loco {

void StepAbort::Abort(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) return;
  aborted_ = true;
  why_ = why;
  // TryCancel does not block: the calls' own threads see CANCELLED.
  for (grpc::ClientContext* ctx : calls_) ctx->TryCancel();
}

bool StepAbort::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

Status StepAbort::reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return why_;
}

void StepAbort::Register(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.push_back(ctx);
  if (aborted_) ctx->TryCancel();
}

void StepAbort::Unregister(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.erase(std::remove(calls_.begin(), calls_.end(), ctx), calls_.end());
}

}  // namespace loco

// ShardMachine's pulls: waiting for a version, the answer of that version,
// and the next version's answer in parts for a pull that waits for it.
#include <algorithm>
#include <chrono>

#include "server/shard_machine.h"

namespace loco {
Status ShardMachine::Pull(const v1::PullRequest& req, v1::PullResponse* resp) {
  ReturnPath::SharedBody body;
  LOCO_RETURN_IF_ERROR(Pull(req, resp, &body));
  ReturnPath::Attach(body, resp);
  return Status::Ok();
}

Status ShardMachine::Pull(const v1::PullRequest& req, v1::PullResponse* header,
                          ReturnPath::SharedBody* body) {
  LOCO_RETURN_IF_ERROR(CheckShardId(req.shard_id()));
  LOCO_RETURN_IF_ERROR(EnsureRange());
  const auto wait = std::min(std::chrono::milliseconds(req.wait_ms()), options_.max_pull_wait);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::unique_lock<std::mutex> lock(mu_);
  version_cv_.wait_until(lock, deadline, [&] {
    return stopping_ || (store_.initialized() && store_.version() >= req.min_version());
  });
  if (stopping_) return Unavailable("the server is shutting down; retry elsewhere or later");
  if (!store_.initialized()) {
    return FailedPrecondition("shard " + std::to_string(options_.shard_id) +
                              " is not initialised (waited " + std::to_string(wait.count()) +
                              " ms); a worker must call InitShard first");
  }
  if (store_.version() < req.min_version()) {
    return DeadlineExceeded("shard " + std::to_string(options_.shard_id) + " reached version " +
                            std::to_string(store_.version()) + ", not min_version " +
                            std::to_string(req.min_version()) + ", within " +
                            std::to_string(wait.count()) + " ms; retry");
  }
  // The body is shared and immutable: it is sent (or copied) after the
  // lock is released, so pushes and the other pulls are not held up by it.
  *body = return_path_.Encode(req, store_.params(), store_.version(), store_.range(), header);
  MarkPulledLocked(req.worker_id());
  return Status::Ok();
}

void ShardMachine::MarkPulledLocked(uint64_t worker_id) {
  const auto waiting = std::find(awaiting_pull_.begin(), awaiting_pull_.end(), worker_id);
  if (waiting != awaiting_pull_.end()) {
    awaiting_pull_.erase(waiting);
    // The answers hold their own references to the body; only the cache goes.
    if (awaiting_pull_.empty()) return_path_.ReleaseRemakeableBodies();
  }
}

// ---------------------------------------------------------------- in parts

StatusOr<std::shared_ptr<AnswerParts>> ShardMachine::NextAnswerFor(const v1::PullRequest& req) {
  LOCO_RETURN_IF_ERROR(CheckShardId(req.shard_id()));
  LOCO_RETURN_IF_ERROR(EnsureRange());
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Unavailable("the server is shutting down; retry elsewhere or later");
  if (store_.version() < req.min_version() && StreamableLocked(req)) {
    return AnswerForNextLocked();
  }
  return std::shared_ptr<AnswerParts>();
}

void ShardMachine::AnswerSent(uint64_t worker_id, uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  if (store_.version() == version) MarkPulledLocked(worker_id);
}

bool ShardMachine::StreamableLocked(const v1::PullRequest& req) const {
  const PullCodec codec = return_path_.options().codec;
  return (codec == PullCodec::kDelta || codec == PullCodec::kBf16) && store_.initialized() &&
         req.have_any() && !req.want_full() && req.have_version() == store_.version() &&
         req.min_version() == store_.version() + 1;
}

std::shared_ptr<AnswerParts> ShardMachine::AnswerForNextLocked() {
  if (!next_answer_ || next_answer_->version() != store_.version() + 1) {
    if (next_answer_) next_answer_->Abandon();
    next_answer_ = std::make_shared<AnswerParts>(store_.version() + 1);
  }
  return next_answer_;
}

void ShardMachine::AbandonAnswerLocked() {
  if (next_answer_) next_answer_->Abandon();
  next_answer_.reset();
}

}  // namespace loco

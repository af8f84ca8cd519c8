// ShardMachine's lifecycle: Stop, restoring from a checkpoint (and the
// fast-forward of a restored shard), checkpoints and copies of the state.
#include "common/log.h"
#include "server/shard_machine.h"

namespace loco {
void ShardMachine::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  AbandonAnswerLocked();
  version_cv_.notify_all();
}

// ---------------------------------------------------------------- restore

Status ShardMachine::RestoreFrom(ShardCheckpoint c) {
  if (c.shard_id != options_.shard_id) {
    return InvalidArgument("checkpoint of shard " + std::to_string(c.shard_id) +
                           " given to shard " + std::to_string(options_.shard_id));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (range_ && (range_->offset != c.range.offset || range_->length != c.range.length)) {
    return FailedPrecondition("the checkpoint covers [" + std::to_string(c.range.offset) + ", " +
                              std::to_string(c.range.offset + c.range.length) +
                              ") but this shard owns [" + std::to_string(range_->offset) + ", " +
                              std::to_string(range_->offset + range_->length) + ")");
  }
  if (range_confirmed_ && c.total_elements != 0 && c.total_elements != total_elements_) {
    return FailedPrecondition("the checkpoint is of a model of " +
                              std::to_string(c.total_elements) + " elements, this shard's of " +
                              std::to_string(total_elements_));
  }
  LOCO_RETURN_IF_ERROR(store_.Restore(c.range, c.version, std::move(c.params), std::move(c.m),
                                      std::move(c.v)));
  if (!range_confirmed_) {
    range_ = c.range;
    total_elements_ = c.total_elements;  // 0 from a format-1 file: learnt on confirmation
  }
  return_path_.Restore(store_.params(), std::move(c.replica));
  AbandonAnswerLocked();
  awaiting_pull_.clear();
  push_buffers_->Recycle(step_.Open(store_.version()));
  members_.reset();
  restored_ = true;
  version_cv_.notify_all();
  return Status::Ok();
}

void ShardMachine::FastForwardLocked(uint64_t step) {
  const uint64_t from = store_.version();
  // Fails only past ShardStore::kMaxVersion (the coordinator bounds the
  // step first); the caller's step check then refuses the push.
  if (!store_.FastForward(step).ok()) return;
  LOG_WARN("shard " << options_.shard_id << " was restored at version " << from
                    << " and the cluster is at step " << step << ": fast-forwarding; the "
                    << (step - from) << " update(s) in between are lost on this shard"
                    << (step_.size() > 0
                            ? ", " + std::to_string(step_.size()) + " push(es) for step " +
                                  std::to_string(from) + " dropped"
                            : std::string()));
  push_buffers_->Recycle(step_.Open(step));
  AbandonAnswerLocked();
  awaiting_pull_.clear();
  members_.reset();
  if (options_.metrics) options_.metrics->OnStepOpened(store_.version());
  version_cv_.notify_all();
}

// ---------------------------------------------------------------- checkpoints

ShardCheckpoint ShardMachine::CheckpointLocked() const {
  ShardCheckpoint c;
  c.shard_id = options_.shard_id;
  c.range = store_.range();
  c.version = store_.version();
  c.total_elements = total_elements_;
  c.params = store_.params();
  c.m = store_.m();
  c.v = store_.v();
  if (c.m.empty()) {  // no step applied yet: the moments are zeros, not held
    c.m.assign(c.params.size(), 0.0f);
    c.v.assign(c.params.size(), 0.0f);
  }
  c.replica = return_path_.replica();
  return c;
}

std::optional<ShardCheckpoint> ShardMachine::CheckpointState() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!store_.initialized()) return std::nullopt;
  return CheckpointLocked();
}

void ShardMachine::CheckpointDone() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!checkpoint_pending_ || due_checkpoint_) return;  // nothing taken, or a newer one due
  checkpoint_pending_ = false;
  Status s = MaybeCompleteLocked();
  if (!s.ok()) LOG_ERROR("shard " << options_.shard_id << ": " << s.ToString());
}

std::optional<ShardCheckpoint> ShardMachine::TakeDueCheckpoint() {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<ShardCheckpoint> due = std::move(due_checkpoint_);
  due_checkpoint_.reset();
  return due;
}

// ---------------------------------------------------------------- copies

ShardStore ShardMachine::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return store_;
}

std::vector<float> ShardMachine::ReturnReplica() const {
  std::lock_guard<std::mutex> lock(mu_);
  return return_path_.replica();
}

uint32_t ShardMachine::pending_pushes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint32_t>(step_.size());
}

}  // namespace loco

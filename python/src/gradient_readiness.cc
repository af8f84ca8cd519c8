#include "gradient_readiness.h"

#include <utility>

namespace loco::python {

StatusOr<std::unique_ptr<GradientReadiness>> GradientReadiness::Create(
    std::vector<size_t> part_begins, size_t num_elements) {
  if (part_begins.empty() || part_begins.front() != 0) {
    return InvalidArgument("part_begins must start with 0, the first part's offset");
  }
  for (size_t i = 1; i < part_begins.size(); ++i) {
    if (part_begins[i] < part_begins[i - 1]) {
      return InvalidArgument("part_begins must not fall; part_begins[" + std::to_string(i) +
                             "]=" + std::to_string(part_begins[i]) + " is below part_begins[" +
                             std::to_string(i - 1) + "]=" + std::to_string(part_begins[i - 1]));
    }
  }
  if (part_begins.back() > num_elements) {
    return InvalidArgument("part_begins[" + std::to_string(part_begins.size() - 1) +
                           "]=" + std::to_string(part_begins.back()) +
                           " is beyond the gradient's size " + std::to_string(num_elements));
  }
  return std::unique_ptr<GradientReadiness>(
      new GradientReadiness(std::move(part_begins), num_elements));
}

GradientReadiness::GradientReadiness(std::vector<size_t> part_begins, size_t num_elements)
    : begins_(std::move(part_begins)),
      num_elements_(num_elements),
      ready_(begins_.size(), false),
      suffix_(begins_.size()) {}

bool GradientReadiness::IsReady(size_t part) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_[part];
}

bool GradientReadiness::MarkReady(size_t part) {
  bool grew = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ready_[part]) return false;
    ready_[part] = true;
    while (suffix_ > 0 && ready_[suffix_ - 1]) {
      --suffix_;
      grew = true;
    }
  }
  // Only a grown suffix is news to Drive: a part below an unmarked one is
  // not reported yet, and waking the step's thread for it would be wasted.
  if (grew) changed_.notify_one();
  return true;
}

void GradientReadiness::Finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (abort_reason_) return;
    finished_ = true;
  }
  changed_.notify_one();
}

void GradientReadiness::Abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_ || abort_reason_) return;
    abort_reason_ = reason;
  }
  changed_.notify_one();
}

size_t GradientReadiness::SuffixBeginLocked() const {
  return suffix_ < begins_.size() ? begins_[suffix_] : num_elements_;
}

Status GradientReadiness::Drive(const GradientReady& ready) {
  size_t reported = num_elements_;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] {
      return finished_ || abort_reason_.has_value() || SuffixBeginLocked() < reported;
    });
    if (abort_reason_) return Aborted(*abort_reason_);
    if (finished_) return Status::Ok();
    reported = SuffixBeginLocked();
    // The worker's ready may take a while (it wakes the shards' threads):
    // the training thread's marks must not wait for it.
    lock.unlock();
    ready(reported);
    lock.lock();
  }
}

}  // namespace loco::python

#include "client/gradient_progress.h"

#include <algorithm>

namespace loco {

void GradientProgress::Ready(size_t from) {
  std::lock_guard<std::mutex> lock(mu_);
  if (from >= final_from_) return;
  final_from_ = from;
  cv_.notify_all();
}

void GradientProgress::Done(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  failed_ = !ok;
  if (ok) final_from_ = 0;
  cv_.notify_all();
}

std::optional<size_t> GradientProgress::WaitFinalBelow(size_t from) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ || final_from_ < from; });
  if (failed_) return std::nullopt;
  return final_from_;
}

void GradientProgress::WaitDone() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
}

}  // namespace loco

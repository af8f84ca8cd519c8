#include "server/answer_parts.h"

namespace loco {

void AnswerParts::Begin(const v1::PullResponse& header, std::shared_ptr<const std::string> data,
                        std::shared_ptr<const std::string> scales, uint64_t wake_every) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kPending) return;
  header_ = header;
  data_ = std::move(data);
  scales_ = std::move(scales);
  wake_every_ = wake_every;
  state_ = State::kStreaming;
  cv_.notify_all();
}

void AnswerParts::Publish(uint64_t begin, uint64_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kStreaming || count == 0) return;
  parts_.push_back(Part{begin, count});
  published_ += count;
  if (published_ - woken_at_ >= wake_every_ || published_ >= header_.params().length()) {
    woken_at_ = published_;
    visible_ = parts_.size();
    cv_.notify_all();
  }
}

void AnswerParts::Abandon() {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = State::kAbandoned;
  cv_.notify_all();
}

uint64_t AnswerParts::published() const {
  std::lock_guard<std::mutex> lock(mu_);
  return published_;
}

AnswerParts::State AnswerParts::Wait(std::chrono::steady_clock::time_point deadline,
                                     size_t* taken, std::vector<Part>* fresh) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, deadline, [&] {
    return state_ == State::kAbandoned ||
           (state_ == State::kStreaming && visible_ > *taken);
  });
  if (state_ == State::kStreaming && visible_ > *taken) {
    fresh->insert(fresh->end(), parts_.begin() + static_cast<std::ptrdiff_t>(*taken),
                  parts_.begin() + static_cast<std::ptrdiff_t>(visible_));
    *taken = visible_;
  }
  return state_;
}

}  // namespace loco

#include "server/step_aggregator.h"

namespace loco {

void StepAggregator::Open(uint64_t step) {
  step_ = step;
  payloads_.clear();
}

bool StepAggregator::Add(uint64_t worker_id, OwnedPayload payload) {
  return payloads_.emplace(worker_id, std::move(payload)).second;
}

std::vector<uint64_t> StepAggregator::workers() const {
  std::vector<uint64_t> ids;
  ids.reserve(payloads_.size());
  for (const auto& [id, p] : payloads_) ids.push_back(id);
  return ids;
}

bool StepAggregator::CompleteFor(const std::vector<uint64_t>& live, size_t slack) const {
  if (payloads_.empty()) return false;
  size_t missing = 0;
  for (uint64_t id : live) {
    if (!Has(id) && ++missing > slack) return false;
  }
  return true;
}

std::vector<PayloadView> StepAggregator::Views() const {
  std::vector<PayloadView> views;
  views.reserve(payloads_.size());
  for (const auto& [id, p] : payloads_) views.push_back(p.view());
  return views;
}

Status StepAggregator::Validate(size_t length) const {
  if (payloads_.empty()) {
    return FailedPrecondition("step " + std::to_string(step_) + " holds no payloads");
  }
  size_t k = 0;
  for (const auto& [id, p] : payloads_) {
    if (Status s = ValidatePayload(p.view(), length); !s.ok()) {
      return s.Annotate("payload " + std::to_string(k) + " (worker " + std::to_string(id) + ")");
    }
    ++k;
  }
  return Status::Ok();
}

void StepAggregator::MeanRange(size_t length, size_t begin, size_t count, float* out) const {
  const std::vector<PayloadView> views = Views();
  // Only the preconditions can fail here, and they are the caller's.
  (void)cpu::DecodeAccumulateRange(views.data(), views.size(), length, begin, count, out);
}

Status StepAggregator::Mean(size_t length, std::vector<float>* out) const {
  if (payloads_.empty()) {
    return FailedPrecondition("step " + std::to_string(step_) + " holds no payloads");
  }
  const std::vector<PayloadView> views = Views();
  // Reuses out's storage. DecodeAccumulate validates every payload before it
  // writes, so on error *out only may have been resized, never partly written.
  out->resize(length);
  return cpu::DecodeAccumulate(views.data(), views.size(), length, out->data());
}

}  // namespace loco

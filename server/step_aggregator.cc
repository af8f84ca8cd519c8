#include "server/step_aggregator.h"

#include <utility>

namespace loco {

std::vector<std::string> StepAggregator::Open(uint64_t step) {
  std::vector<std::string> buffers;
  buffers.reserve(payloads_.size());
  for (auto& [worker, payload] : payloads_) buffers.push_back(std::move(payload.data));
  step_ = step;
  payloads_.clear();
  hyper_.reset();
  withdrawn_.clear();
  return buffers;
}

void StepAggregator::FixHyper(HyperGroups hyper) {
  if (!hyper_) hyper_ = std::move(hyper);
}

bool StepAggregator::Add(uint64_t worker_id, OwnedPayload payload) {
  if (!payloads_.emplace(worker_id, std::move(payload)).second) return false;
  withdrawn_.erase(worker_id);
  return true;
}

bool StepAggregator::Withdraw(uint64_t worker_id) { return withdrawn_.insert(worker_id).second; }

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
    if (!Has(id) && !Withdrew(id) && ++missing > slack) return false;
  }
  return true;
}

std::vector<PayloadView> StepAggregator::views() const {
  std::vector<PayloadView> out;
  out.reserve(payloads_.size());
  for (const auto& [id, p] : payloads_) out.push_back(p.view());
  return out;
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

Status StepAggregator::Mean(size_t length, std::vector<float>* out) const {
  LOCO_RETURN_IF_ERROR(Validate(length));
  const std::vector<PayloadView> all = views();
  // Reuses out's storage; the payloads were validated, so only the
  // preconditions of the range call remain, and they hold.
  out->resize(length);
  return cpu::DecodeAccumulateRange(all.data(), all.size(), length, 0, length, out->data());
}

}  // namespace loco

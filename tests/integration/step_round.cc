#include "tests/integration/step_round.h"

#include <utility>

namespace loco::test {

StepRound::~StepRound() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void StepRound::Start(std::vector<Member> members) {
  members_ = std::move(members);
  results_.assign(members_.size(), Status(StatusCode::kInternal, "Step did not run"));
  threads_.clear();
  for (size_t i = 0; i < members_.size(); ++i) {
    threads_.emplace_back([this, i] {
      const Member& m = members_[i];
      results_[i] = m.worker->Step(*m.grads, m.params);
    });
  }
}

std::vector<StatusOr<StepResult>> StepRound::Finish() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  return std::move(results_);
}

}  // namespace loco::test

#include "launch/coordinator_outage.h"

namespace loco {

void CoordinatorOutage::Killed(Clock::time_point now, uint64_t step,
                               std::chrono::milliseconds down, const std::string& fault) {
  if (state_ == State::kIdle) {
    pause_ = Pause{};
    pause_.fault = fault;
    pause_.step_at_kill = step;
    killed_at_ = now;
  }
  ++pause_.kills;
  restart_at_ = now + down;
  state_ = State::kDown;
}

void CoordinatorOutage::Restarted(Clock::time_point /*now*/, uint64_t step) {
  if (state_ != State::kDown) return;
  state_ = State::kRestarted;
  step_at_restart_ = step;
  pause_.steps_while_down = step > pause_.step_at_kill ? step - pause_.step_at_kill : 0;
}

std::optional<CoordinatorOutage::Pause> CoordinatorOutage::StepObserved(Clock::time_point now,
                                                                         uint64_t step) {
  if (state_ != State::kRestarted || step <= step_at_restart_) return std::nullopt;
  state_ = State::kIdle;
  pause_.pause = std::chrono::duration_cast<std::chrono::milliseconds>(now - killed_at_);
  pause_.resumed_at_step = step;
  return pause_;
}

std::chrono::milliseconds CoordinatorOutage::since_kill(Clock::time_point now) const {
  if (state_ == State::kIdle) return std::chrono::milliseconds(0);
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - killed_at_);
}

}  // namespace loco

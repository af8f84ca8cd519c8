// CoordinatorOutage: the bookkeeping of a kill-coordinator fault, from the
// SIGKILL to the first step the cluster completes after the restart, so that
// loco-launch can restart the coordinator when it is due and report how long
// training stood still.
//
// The pause is the time from the (first) kill until the cluster's step moves
// past the step it had when the coordinator came back. Steps that complete
// while the coordinator is down (in flight at the kill, or driven by what the
// servers still know) are counted apart: they are not "the step moving again"
// after a recovery. A second kill before the step moved (the coordinator
// killed again within one recovery window) extends the same outage: its
// pause still runs from the first kill.
//
// Pure state, no processes and no clock of its own (every call takes `now`),
// so that it can be tested without a cluster. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace loco {

class CoordinatorOutage {
 public:
  using Clock = std::chrono::steady_clock;

  // What one outage cost, once the step moved after the restart.
  struct Pause {
    std::string fault;  // the first kill's fault, as Fault::ToString
    int kills = 0;      // SIGKILLs within this outage (> 1: killed again before recovery)
    std::chrono::milliseconds pause{0};  // first kill -> the step moved after the restart
    uint64_t step_at_kill = 0;
    uint64_t steps_while_down = 0;  // completed between the first kill and the last restart
    uint64_t resumed_at_step = 0;   // the step that showed the cluster moving again
  };

  // The coordinator was SIGKILLed at `now`, the cluster at `step`; it is to
  // be restarted `down` later. Precondition: !down() (the launcher defers a
  // kill that comes due while the coordinator is already down).
  void Killed(Clock::time_point now, uint64_t step, std::chrono::milliseconds down,
              const std::string& fault);
  // Killed and not restarted yet.
  bool down() const { return state_ == State::kDown; }
  // Down, and its delay has passed.
  bool restart_due(Clock::time_point now) const { return down() && now >= restart_at_; }
  // Killed at all and not yet over (down, or restarted and the step not moved).
  bool open() const { return state_ != State::kIdle; }
  // The coordinator was started again at `now`, the cluster at `step`.
  void Restarted(Clock::time_point now, uint64_t step);
  // Called on every poll with the cluster's step: the outage's cost once the
  // step moved past its value at the restart (the outage then closes).
  std::optional<Pause> StepObserved(Clock::time_point now, uint64_t step);

  // For messages while open: when the first kill was, and how long ago.
  std::chrono::milliseconds since_kill(Clock::time_point now) const;
  const std::string& fault() const { return pause_.fault; }

 private:
  enum class State { kIdle, kDown, kRestarted };
  State state_ = State::kIdle;
  Clock::time_point killed_at_{}, restart_at_{};
  uint64_t step_at_restart_ = 0;
  Pause pause_;
};

}  // namespace loco

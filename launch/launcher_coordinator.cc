// Launcher's coordinator: starting it (on a fixed port with a state
// directory when the plan restarts it), kill-coordinator faults, its restart, and the
// pause each outage caused. See launcher.h.
#include <algorithm>
#include <filesystem>
#include <system_error>

#include "launch/child_argv.h"
#include "launch/launcher.h"

namespace loco {

bool Launcher::PlansCoordinatorRestart() const {
  return std::any_of(options_.faults.begin(), options_.faults.end(), [](const Fault& fault) {
    return fault.kind == Fault::Kind::kKillCoordinator;
  });
}

Status Launcher::PrepareCoordinatorForRestarts(std::vector<std::string>* argv) {
  // Picked, then bound by the coordinator: another process could take it in
  // between, which StartListener then reports. --port 0 cannot be used, as
  // a restart must come back where the servers and workers dial.
  auto port = LocalPrometheus::PickFreePort();
  if (!port.ok()) return port.status();
  for (auto& arg : *argv) {
    if (arg == "--port=0") arg = "--port=" + std::to_string(*port);
  }
  // The coordinator makes its ticket key there on its first start and
  // signs with it again after each restart.
  const std::string state_dir = options_.log_dir + "/coordinator-state";
  std::error_code made;
  std::filesystem::create_directories(state_dir, made);
  if (made) {
    return InvalidArgument("cannot make the coordinator's state directory " + state_dir + ": " +
                           made.message());
  }
  argv->push_back("--state-dir=" + state_dir);
  return Status::Ok();
}

Status Launcher::StartCoordinator(std::string* address) {
  std::vector<std::string> argv = CoordinatorArgv(options_);
  if (PlansCoordinatorRestart()) LOCO_RETURN_IF_ERROR(PrepareCoordinatorForRestarts(&argv));
  AddMetrics(&argv);
  coordinator_argv_ = argv;
  return StartListener("coordinator", argv, {"coordinator", "coordinator"}, &coordinator_, address);
}

bool Launcher::FireKillCoordinator(const Fault& fault, uint64_t max_step) {
  if (coordinator_outage_.down()) return false;
  if (!coordinator_->running()) {
    Event("fault " + fault.ToString() + ": the coordinator is not running; skipped");
    return true;
  }
  coordinator_->Signal(SIGKILL);
  const auto down = std::chrono::milliseconds(fault.coordinator_down_ms());
  coordinator_outage_.Killed(Clock::now(), max_step, down, fault.ToString());
  Event("fault " + fault.ToString() + ": SIGKILL to the coordinator at step " +
        std::to_string(max_step) + "; restarting it in " + std::to_string(down.count()) + " ms");
  return true;
}

Status Launcher::CheckCoordinator(uint64_t max_step) {
  const auto now = Clock::now();
  if (coordinator_->Poll()) {
    // Killed by a fault: restarted once its delay has passed. Otherwise (or
    // dead again after its restart, on its own) training cannot go on.
    if (!coordinator_outage_.down()) {
      return ChildFailure(*coordinator_,
                          "exited unexpectedly with " + coordinator_->DescribeExit());
    }
    if (coordinator_outage_.restart_due(now)) LOCO_RETURN_IF_ERROR(RestartCoordinator(max_step));
    return Status::Ok();
  }
  if (auto pause = coordinator_outage_.StepObserved(now, max_step)) {
    faults_so_far_.coordinator_pause_s += std::chrono::duration<double>(pause->pause).count();
    Event("fault " + pause->fault + ": training paused " + std::to_string(pause->pause.count()) +
          " ms (from the kill at step " + std::to_string(pause->step_at_kill) +
          " until step " + std::to_string(pause->resumed_at_step) + " after the restart; " +
          std::to_string(pause->kills) + " kill(s), " + std::to_string(pause->steps_while_down) +
          " step(s) completed while the coordinator was down)");
  }
  return Status::Ok();
}

Status Launcher::RestartCoordinator(uint64_t at_step) {
  ++faults_so_far_.coordinator_restarts;
  const std::string name =
      "coordinator.restart" + std::to_string(faults_so_far_.coordinator_restarts);
  const auto down = coordinator_outage_.since_kill(Clock::now());
  std::string address;
  if (Status s = StartListener(name, coordinator_argv_, {"coordinator", "coordinator"},
                               &coordinator_, &address);
      !s.ok()) {
    return Aborted("the coordinator could not be restarted after a " +
                   coordinator_outage_.fault() + " fault, so training cannot go on: " +
                   s.message());
  }
  coordinator_outage_.Restarted(Clock::now(), at_step);
  Event("coordinator restarted on " + address + " " + std::to_string(down.count()) +
        " ms after the kill, at step " + std::to_string(at_step) +
        "; servers and workers re-register with it");
  return Status::Ok();
}

void Launcher::ReportUnfinishedOutage(uint64_t max_step) {
  if (!coordinator_outage_.open()) return;
  Event("fault " + coordinator_outage_.fault() + ": training ended at step " +
        std::to_string(max_step) + " " +
        std::to_string(coordinator_outage_.since_kill(Clock::now()).count()) +
        " ms after the kill, " +
        (coordinator_outage_.down() ? "before the coordinator was restarted"
                                    : "before its step moved after the restart"));
}

}  // namespace loco

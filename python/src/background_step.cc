#include "background_step.h"

#include <pybind11/pybind11.h>

#include <chrono>
#include <exception>
#include <mutex>
#include <string>
#include <utility>

#include "gil.h"
#include "signal_watch.h"

namespace py = pybind11;

namespace loco::python {

BackgroundStep::BackgroundStep(Worker* worker, CallSlot::Held slot, FloatArray grads,
                               FloatArray params, std::unique_ptr<GradientReadiness> readiness)
    : readiness_(std::move(readiness)), grads_(std::move(grads)), params_(std::move(params)) {
  const std::span<const float> gradient = grads_.values();
  const std::span<float> parameters = params_.mutable_values();
  thread_ = std::thread([this, worker, gradient, parameters, held = std::move(slot)]() mutable {
    worker->SetInterruptCheck([this] { return interrupted_.load(); });
    try {
      result_ = worker->Step(
          [this](const GradientReady& ready) { return readiness_->Drive(ready); }, gradient,
          parameters);
    } catch (const std::exception& e) {  // an exception must not end the process here
      result_ = Internal(std::string("the background step failed: ") + e.what());
    }
    worker->SetInterruptCheck(nullptr);
    // The worker is free for the next call as soon as its step is over.
    held.Release();
    std::lock_guard<std::mutex> lock(done_mu_);
    done_ = true;
    done_cv_.notify_all();
  });
}

BackgroundStep::~BackgroundStep() {
  Abort("the step was dropped before finish() or abort()");
  // The arrays' buffers are released by their destructors, with the GIL
  // held as the caller (Python's deallocation) holds it.
}

bool BackgroundStep::Join(bool watch_signals) {
  bool raised = false;
  {
    GilReleased released;
    {
      std::unique_lock<std::mutex> lock(join_mu_, std::defer_lock);
      if (InterpreterFinalizing()) {
        // A finish() of a daemon thread may hold the lock, parked for
        // good (gil.h): an abort() from a __del__ during finalization
        // must not wait for it. The step then ends with the process; the
        // parked thread's reference keeps this object alive.
        if (!lock.try_lock()) return false;
      } else {
        lock.lock();
      }
      if (watch_signals) {
        raised = WaitWatchingSignals(
            [this](std::chrono::milliseconds slice) {
              std::unique_lock<std::mutex> done_lock(done_mu_);
              return done_cv_.wait_for(done_lock, slice, [this] { return done_; });
            },
            [this] { interrupted_ = true; });
      }
      if (thread_.joinable()) thread_.join();
    }
    // Interrupted because the process exits: a finish() of a daemon thread
    // (the others were joined before the atexit handlers) parks, the lock
    // released, so that an abort() from a __del__ still ends the step.
    if (watch_signals && exiting_.load()) ParkUntilExit();
  }
  ended_ = true;
  return raised;
}

void BackgroundStep::InterruptAtExit() {
  exiting_ = true;
  interrupted_ = true;
  readiness_->Abort("the process is exiting");
}

bool BackgroundStep::thread_done() const {
  std::lock_guard<std::mutex> lock(done_mu_);
  return done_;
}

StatusOr<StepResult> BackgroundStep::Finish() {
  if (ended_) return FailedPrecondition("finish(): this step has ended already");
  readiness_->Finish();
  if (Join(/*watch_signals=*/true)) throw py::error_already_set();
  if (!ended_) {  // finalizing, and another thread's finish() holds the step
    return FailedPrecondition(
        "finish(): the interpreter is exiting and another thread waits "
        "for this step");
  }
  return *result_;
}

void BackgroundStep::Abort(const std::string& reason) {
  if (ended_) return;
  interrupted_ = true;
  readiness_->Abort(reason);
  (void)Join(/*watch_signals=*/false);
}

}  // namespace loco::python

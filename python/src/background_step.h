// BackgroundStep: one overlapped step (Worker::Step with a computation) run
// on a C++ thread of its own while the caller's backward pass runs, the
// object behind _core.BackgroundStep (Worker.start_background_step).
//
// The overlapped step's computation is GradientReadiness::Drive: it waits
// for the parts the training thread marks final and hands each growth of
// the final suffix to the worker, so the parts are compressed and pushed
// while backward goes on. The step's thread never takes the GIL: a mark is
// a few comparisons under a mutex and a notify, so a gradient hook does not
// wait for the step's thread, nor the step's thread for the interpreter.
// (Worker.step_overlapped, by contrast, runs a Python computation, which
// must hold the GIL for every report.)
//
// Lifetime: the step holds the Worker's call slot until it ends, and keeps
// the two arrays exported. Exactly one of Finish or Abort ends it; the
// destructor aborts a step that neither ended.
//
// Thread safety: IsReady and MarkReady from any thread; Finish, Abort and
// the destructor with the GIL held (they release it while they wait; a
// second thread's Finish or Abort meanwhile waits for the same end).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "call_slot.h"
#include "client/worker.h"
#include "client/worker_stats.h"
#include "common/status.h"
#include "float_array.h"
#include "gradient_readiness.h"

namespace loco::python {

class BackgroundStep {
 public:
  // Starts worker->Step(readiness->Drive, grads, params) on a new thread.
  // `worker` must outlive the step (its handle waits for the call slot
  // before destroying it); `slot` is given back when the step ends.
  BackgroundStep(Worker* worker, CallSlot::Held slot, FloatArray grads, FloatArray params,
                 std::unique_ptr<GradientReadiness> readiness);
  // Aborts the step if it has not ended, and waits for it. GIL held.
  ~BackgroundStep();
  BackgroundStep(const BackgroundStep&) = delete;
  BackgroundStep& operator=(const BackgroundStep&) = delete;

  size_t num_parts() const { return readiness_->num_parts(); }
  bool IsReady(size_t part) const { return readiness_->IsReady(part); }
  // False (nothing changes) when the part was marked already.
  bool MarkReady(size_t part) { return readiness_->MarkReady(part); }

  // The whole gradient is final: waits (GIL released) for the step and
  // returns its result. FailedPrecondition once the step has ended. Every
  // 100 ms of the wait it runs Python's signal handlers (on the main
  // thread; elsewhere they find nothing): what one raises, KeyboardInterrupt
  // for Ctrl-C, interrupts the step (Worker::SetInterruptCheck), which ends
  // within about 0.1 s even while a server is away, and is thrown
  // (py::error_already_set) once it has ended.
  [[nodiscard]] StatusOr<StepResult> Finish();
  // Fails the step with Aborted(reason) (the worker cancels a shard pushed
  // in part; client/worker.h), interrupts its retries of a server that is
  // away, and waits for it (GIL released). Nothing happens once the step
  // has ended. While the interpreter finalizes, neither waits for a
  // finish() of another thread (parked for good, gil.h): Abort then only
  // fails the step, and Finish returns FailedPrecondition.
  void Abort(const std::string& reason);
  // Neither Finish nor Abort has run.
  bool running() const { return !ended_; }
  // At interpreter exit (WorkerHandle::CloseAtExit): interrupts the step
  // as Abort does, without waiting for it and without the GIL; a finish()
  // waiting for it on a daemon thread then parks once the step has ended
  // (ParkUntilExit) instead of raising in a thread about to end.
  void InterruptAtExit();
  // The step's thread has ended (any thread).
  bool thread_done() const;

 private:
  // Joins the step's thread with the GIL released, running Python's
  // signal handlers every 100 ms meanwhile when `watch_signals` (Finish).
  // Returns whether one raised (its exception is set; the step was
  // interrupted and has ended). While the interpreter finalizes, returns
  // false at once, not joined (ended_ stays false), when another thread
  // holds join_mu_.
  bool Join(bool watch_signals);

  std::unique_ptr<GradientReadiness> readiness_;
  FloatArray grads_;
  FloatArray params_;
  std::optional<StatusOr<StepResult>> result_;  // written by the thread, read after Join
  std::mutex join_mu_;  // taken without the GIL: one thread joins, others wait
  // The step's interrupt check (Worker::SetInterruptCheck) reads it.
  std::atomic<bool> interrupted_{false};
  std::atomic<bool> exiting_{false};  // InterruptAtExit ran
  // Set by the step's thread as it ends, under done_mu_.
  mutable std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
  bool ended_ = false;  // Finish or Abort ran; under the GIL
};

}  // namespace loco::python

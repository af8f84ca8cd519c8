// WorkerHandle: the object behind _core.Worker. It owns one loco::Worker,
// checks the numpy arrays it is given (python/src/float_array.h), releases
// the GIL for every call that talks to the cluster, and turns a failed
// loco::Status into a loco_ps.ClusterError (python/src/status_error.h).
//
// Thread safety: the calls that talk to the cluster (Join, InitParameters,
// Rejoin, Step, StepOverlapped, StartBackgroundStep, WaitForClusterStep,
// Leave) are one at a time, as loco::Worker requires: one made while
// another call is in progress (on another thread, or a background step not
// yet over) raises RuntimeError instead of racing it. Close aborts a
// background step and waits for any other call to end. The properties may
// be read from any thread at any time. Every method is called with the GIL
// held (from Python).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include <pybind11/pybind11.h>

#include "background_step.h"
#include "call_slot.h"
#include "client/worker.h"
#include "client/worker_options.h"
#include "client/worker_stats.h"
#include "gil.h"
#include "metrics/metrics_endpoint.h"  // MetricsEndpointOptions

namespace loco::python {

class WorkerHandle {
 public:
  // Validates `options` and opens the (lazy) channel to the coordinator;
  // nothing is sent yet. Raises InvalidArgumentError naming a bad option.
  // With `metrics`, then serves the worker's metrics (its registry and the
  // process's memory, as loco-worker's --metrics-port does) on
  // http://host:port/metrics until Close, from a Python HTTP server on a
  // daemon thread (loco_ps/_metrics_server.py; metrics/metrics_text.h says
  // why not prometheus-cpp's); UnavailableError when the port cannot be
  // bound. GIL held.
  WorkerHandle(const WorkerOptions& options, const std::optional<MetricsEndpointOptions>& metrics);
  // Closes (see Close).
  ~WorkerHandle();
  WorkerHandle(const WorkerHandle&) = delete;
  WorkerHandle& operator=(const WorkerHandle&) = delete;

  void Join(int64_t num_elements);
  // `params`: 1-D float32 numpy array of the model's size, writeable. Its
  // values are offered as the initial parameters (the first offer wins);
  // on return it holds the cluster's copy.
  void InitParameters(pybind11::handle params);
  // After expiry: joins again and overwrites `params` (as InitParameters).
  void Rejoin(pybind11::handle params);
  // One synchronous step: reads `grads`, writes the new parameters into
  // `params` in place. Returns the StepResult as a dict.
  pybind11::dict Step(pybind11::handle grads, pybind11::handle params);
  // The same step while `compute(ready)` fills `grads` on this thread with
  // the GIL held; an exception it raises is re-raised here after the step
  // is abandoned (nothing of a partly pushed shard is kept).
  pybind11::dict StepOverlapped(const pybind11::function& compute, pybind11::handle grads,
                                pybind11::handle params);
  // Per-group hyperparameters for the following steps
  // (loco::Worker::SetStepHyper): a sequence of (begin, end, lr, beta1,
  // beta2, eps, weight_decay). TypeError for a malformed entry, ValueError
  // for groups the client library refuses; nothing changes then.
  void SetStepHyper(pybind11::handle groups);
  // Starts an overlapped step on a thread of its own (BackgroundStep) whose
  // gradient is final part by part as the caller marks the parts of
  // `part_begins` (ascending offsets from 0) ready: grads read, params
  // written in place once the step is finished. The call slot stays taken
  // until the step ends. ValueError for bad part_begins.
  std::shared_ptr<BackgroundStep> StartBackgroundStep(pybind11::handle grads,
                                                      pybind11::handle params,
                                                      pybind11::handle part_begins);
  uint64_t WaitForClusterStep(uint64_t step, double timeout_s);
  // Leaves the cluster (with retries). Idempotent.
  void Leave();
  // Destroys the loco::Worker, which leaves the cluster with one bounded
  // attempt if still joined; aborts a background step in flight and waits
  // for a call in progress on another thread first. Idempotent. Raises
  // only when called from inside StepOverlapped's computation
  // (RuntimeError). Later calls raise FailedPreconditionError; the
  // properties keep their last values. Once the interpreter finalizes, as
  // CloseAtExit: the call of another thread may never end.
  void Close();
  // At interpreter exit: Close, unless a call of another thread is still in
  // progress (a daemon thread's step or join); then interrupts a join in
  // progress and tells the coordinator at once that this worker leaves
  // (Worker::LeaveNow), so that the cluster's steps stop waiting for it. A
  // join, init_parameters, rejoin or step (step_overlapped once its
  // compute has returned) is interrupted too, and waited for up to about
  // 1 s: its threads in the client library then end before the process
  // tears down, instead of retrying a server that is away meanwhile; its
  // own thread parks (gil.h) rather than raise the interruption in a
  // daemon thread that the interpreter is about to end. So are
  // wait_for_cluster_step and a background step
  // (BackgroundStep::InterruptAtExit).
  void CloseAtExit();
  // The C++ part of a join, init_parameters, rejoin, step, background
  // step or wait_for_cluster_step is running (the client library has not
  // returned): for the exit tests. Under the GIL.
  bool call_running() const;

  uint64_t step() const;
  uint32_t rank() const;
  uint32_t world_size() const;
  uint64_t worker_id() const;
  bool expired() const;
  TrafficStats traffic() const;
  // The model size joined with (0 before Join).
  size_t num_elements() const { return num_elements_; }
  bool closed() const { return worker_ == nullptr; }
  // "host:port" of the /metrics endpoint (the port bound, when 0 was asked
  // for); none without one, or once closed.
  std::optional<std::string> metrics_address() const;

 private:
  // What the properties report once closed.
  struct LastState {
    uint64_t step = 0;
    uint32_t rank = 0;
    uint32_t world_size = 0;
    uint64_t worker_id = 0;
    bool expired = false;
    TrafficStats traffic;
  };

  // Starts metrics_server_ on `metrics`, rendering `registry`. GIL held.
  void ServeMetrics(const MetricsEndpointOptions& metrics,
                    std::shared_ptr<prometheus::Registry> registry);
  // Close's work once `held` is this worker's call slot (under the GIL):
  // keeps the properties' last values and destroys the loco::Worker with
  // the GIL released. Does nothing when closed already.
  void CloseHolding(CallSlot::Held held);
  // Takes the call slot for `method`: RuntimeError when another call holds
  // it, FailedPreconditionError when closed.
  CallSlot::Held BeginCall(const char* method);
  // The model size, or none before Join (the client library then says
  // what is missing).
  std::optional<size_t> JoinedSize() const;
  // Init and Rejoin: `initial` is offered, then overwritten by the cluster's
  // copy. Call with the GIL (released inside); Ctrl-C ends its waits and
  // is raised (py::error_already_set).
  Status ReceiveParameters(bool rejoin, std::span<float> params);
  // A step (overlapped when `compute` is set) that writes `params` in
  // place. GIL released inside.
  StatusOr<StepResult> StepInPlace(const Worker::GradientCompute* compute,
                                   std::span<const float> grads, std::span<float> params);

  // `call()`, counted in calls_running_ (CloseAtExit waits for none). Any
  // thread.
  template <typename Call>
  auto Counted(const Call& call) {
    ++calls_running_;
    auto result = call();
    --calls_running_;
    return result;
  }
  // `call()` (a wait in the client library, on this thread) with the GIL
  // released and counted. Interrupted because the process exits, this
  // thread is a daemon one (the others were joined before the atexit
  // handlers): the interruption would only be raised in a thread about to
  // end, or during finalization, so it parks instead (gil.h), as
  // CallWatchingSignals' park_when_done does. Call with the GIL.
  template <typename Call>
  auto CallReleased(const Call& call) {
    GilReleased released;
    auto result = Counted(call);
    if (exiting_.load()) ParkUntilExit();
    return result;
  }
  // The interrupt check of such a wait: the exit flag (no GIL needed),
  // then Python's signal handlers (PythonSignalRaised takes the GIL).
  bool ExitingOrSignalRaised() const;
  // A counted call, or `background`'s thread (may be null), still runs.
  bool CallRunning(const BackgroundStep* background) const;

  CallSlot call_slot_;  // held for the length of a call that talks to the cluster
  // The last background step started, while Python holds it (Close aborts
  // it if it is still running); under the GIL.
  std::weak_ptr<BackgroundStep> background_;
  // Null once closed. Replaced only under the GIL and the call slot, so
  // that a property read (under the GIL) never sees it destroyed.
  std::unique_ptr<Worker> worker_;
  // The loco_ps._metrics_server.MetricsServer serving worker_'s registry;
  // None without metrics_port, or once closed. Under the GIL.
  pybind11::object metrics_server_ = pybind11::none();
  size_t num_elements_ = 0;  // under the GIL
  bool computing_ = false;   // StepOverlapped's computation runs; under the GIL
  // Set by CloseAtExit while a call of another thread is in progress: read
  // without the GIL by the calls' interrupt checks, and by the calls once
  // the client library returns. Thread-safe.
  std::atomic<bool> exiting_{false};
  // Calls in the client library (GIL released) that CloseAtExit
  // interrupts and waits for. Thread-safe.
  std::atomic<int> calls_running_{0};
  LastState last_;           // set by Close
};

}  // namespace loco::python

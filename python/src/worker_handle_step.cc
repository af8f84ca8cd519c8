// WorkerHandle's steps: the arrays are checked, the GIL is released for the
// step, and an overlapped step's Python computation gets the GIL back on
// the calling thread while the shards' pushes run beside it.
#include <algorithm>
#include <exception>
#include <vector>

#include "background_step.h"
#include "float_array.h"
#include "gil.h"
#include "gradient_readiness.h"
#include "gradient_ready_callback.h"
#include "result_dicts.h"
#include "signal_watch.h"
#include "status_error.h"
#include "worker_handle.h"

namespace py = pybind11;

namespace loco::python {
namespace {

void CheckDisjoint(const FloatArray& grads, const FloatArray& params) {
  if (Overlap(grads.values(), params.values())) {
    throw py::value_error("grads and params share memory; the step reads grads while it writes "
                          "the new parameters into params, so they must be separate arrays");
  }
}

// start_background_step's part_begins: a sequence of ints >= 0; TypeError
// naming the entry that is not one. Their order is GradientReadiness's to
// check.
std::vector<size_t> PartBegins(py::handle part_begins) {
  if (!py::isinstance<py::sequence>(part_begins) || py::isinstance<py::str>(part_begins)) {
    throw py::type_error("start_background_step: part_begins must be a sequence of ints (the "
                         "offsets where the gradient's parts begin), not " +
                         std::string(py::str(py::type::of(part_begins).attr("__name__"))));
  }
  const auto sequence = py::reinterpret_borrow<py::sequence>(part_begins);
  std::vector<size_t> begins;
  begins.reserve(sequence.size());
  for (size_t i = 0; i < sequence.size(); ++i) {
    const py::object entry = sequence[i];
    if (!py::isinstance<py::int_>(entry) || entry.cast<py::int_>() < py::int_(0)) {
      throw py::type_error("start_background_step: part_begins[" + std::to_string(i) +
                           "] must be an int >= 0, not " + std::string(py::str(py::repr(entry))));
    }
    begins.push_back(entry.cast<size_t>());
  }
  return begins;
}

}  // namespace

StatusOr<StepResult> WorkerHandle::StepInPlace(const Worker::GradientCompute* compute,
                                               std::span<const float> grads,
                                               std::span<float> params) {
  // Ctrl-C while the step waits for a server that is away: every 100 ms of
  // such a wait, this thread takes the GIL and lets Python's signal
  // handlers run (they run only on the main thread: from another thread
  // this finds nothing). What a handler raised, KeyboardInterrupt for
  // SIGINT, ends the step and is raised once it has ended, instead of after
  // step_timeout_ms.
  // At exit (CloseAtExit) the check says so without the GIL, which the
  // exiting thread holds.
  worker_->SetInterruptCheck([this] { return ExitingOrSignalRaised(); });
  StatusOr<StepResult> result = CallReleased([&] {
    // The new parameters are written into the caller's buffer in place: no copy.
    return compute != nullptr ? worker_->Step(*compute, grads, params)
                              : worker_->Step(grads, params);
  });
  worker_->SetInterruptCheck(nullptr);
  if (PyErr_Occurred() != nullptr) throw py::error_already_set();
  return result;
}

py::dict WorkerHandle::Step(py::handle grads, py::handle params) {
  auto lock = BeginCall("step");
  FloatArray grad_array = FloatArray::From(grads, "grads", ArrayAccess::kRead, JoinedSize());
  FloatArray param_array = FloatArray::From(params, "params", ArrayAccess::kWrite, JoinedSize());
  CheckDisjoint(grad_array, param_array);
  StatusOr<StepResult> result =
      StepInPlace(nullptr, grad_array.values(), param_array.mutable_values());
  RaiseIfError(result.status());
  return StepResultDict(*result);
}

py::dict WorkerHandle::StepOverlapped(const py::function& compute, py::handle grads,
                                      py::handle params) {
  auto lock = BeginCall("step_overlapped");
  FloatArray grad_array = FloatArray::From(grads, "grads", ArrayAccess::kRead, JoinedSize());
  FloatArray param_array = FloatArray::From(params, "params", ArrayAccess::kWrite, JoinedSize());
  CheckDisjoint(grad_array, param_array);
  const size_t size = grad_array.size();
  // What compute raised, re-raised once the step has given up: a C++
  // exception must not cross the client library's threads.
  std::exception_ptr raised;
  const Worker::GradientCompute run = [&](const GradientReady& ready) -> Status {
    GilTaken gil;
    computing_ = true;
    try {
      py::object callback = py::cast(GradientReadyCallback(&ready, size));
      try {
        // Not compute(callback): on a daemon thread, the interpreter may
        // finalize while compute has let go of the GIL (python/src/gil.h).
        const auto returned =
            py::reinterpret_steal<py::object>(CallOrPark(compute.ptr(), callback.ptr()));
        if (!returned) throw py::error_already_set();
      } catch (...) {
        raised = std::current_exception();
      }
      callback.cast<GradientReadyCallback&>().Expire();
    } catch (...) {
      if (!raised) raised = std::current_exception();
    }
    computing_ = false;
    if (raised) return Aborted("step_overlapped: the gradient computation raised an exception");
    return Status::Ok();
  };
  StatusOr<StepResult> result =
      StepInPlace(&run, grad_array.values(), param_array.mutable_values());
  if (raised) std::rethrow_exception(raised);
  RaiseIfError(result.status());
  return StepResultDict(*result);
}

std::shared_ptr<BackgroundStep> WorkerHandle::StartBackgroundStep(py::handle grads,
                                                                  py::handle params,
                                                                  py::handle part_begins) {
  CallSlot::Held held = BeginCall("start_background_step");
  FloatArray grad_array = FloatArray::From(grads, "grads", ArrayAccess::kRead, JoinedSize());
  FloatArray param_array = FloatArray::From(params, "params", ArrayAccess::kWrite, JoinedSize());
  CheckDisjoint(grad_array, param_array);
  StatusOr<std::unique_ptr<GradientReadiness>> readiness =
      GradientReadiness::Create(PartBegins(part_begins), grad_array.size());
  if (!readiness.ok()) {
    throw py::value_error("start_background_step: " + readiness.status().message());
  }
  auto step = std::make_shared<BackgroundStep>(worker_.get(), std::move(held),
                                               std::move(grad_array), std::move(param_array),
                                               std::move(*readiness));
  background_ = step;
  return step;
}

}  // namespace loco::python

#include "worker_handle.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "float_array.h"
#include "status_error.h"

namespace py = pybind11;

namespace loco::python {

WorkerHandle::WorkerHandle(const WorkerOptions& options) {
  StatusOr<std::unique_ptr<Worker>> connected = [&] {
    py::gil_scoped_release release;
    return Worker::Connect(options);
  }();
  RaiseIfError(connected.status());
  worker_ = std::move(*connected);
}

WorkerHandle::~WorkerHandle() { Close(); }

std::unique_lock<std::mutex> WorkerHandle::BeginCall(const char* method) {
  std::unique_lock<std::mutex> lock(call_mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    throw std::runtime_error(std::string(method) +
                             ": another call on this Worker is still running on another thread; "
                             "the calls that talk to the cluster must come one at a time");
  }
  if (worker_ == nullptr) {
    RaiseStatus(FailedPrecondition(std::string(method) + ": this Worker is closed"));
  }
  return lock;
}

std::optional<size_t> WorkerHandle::JoinedSize() const {
  if (num_elements_ == 0) return std::nullopt;
  return num_elements_;
}

void WorkerHandle::Join(int64_t num_elements) {
  auto lock = BeginCall("join");
  if (num_elements <= 0) {
    throw py::value_error("join(num_elements): num_elements=" + std::to_string(num_elements) +
                          " must be >= 1, the number of float32 parameters of the model");
  }
  Status joined;
  {
    py::gil_scoped_release release;
    joined = worker_->Join(static_cast<size_t>(num_elements));
  }
  RaiseIfError(joined);
  num_elements_ = static_cast<size_t>(num_elements);
}

Status WorkerHandle::ReceiveParameters(bool rejoin, std::span<float> params) {
  py::gil_scoped_release release;
  // The caller's buffer is both the offered initial parameters and where
  // the cluster's copy is written, in place (client/worker.h allows it).
  return rejoin ? worker_->Rejoin(params, params) : worker_->InitParameters(params, params);
}

void WorkerHandle::InitParameters(py::handle params) {
  auto lock = BeginCall("init_parameters");
  FloatArray array = FloatArray::From(params, "params", ArrayAccess::kWrite, JoinedSize());
  RaiseIfError(ReceiveParameters(/*rejoin=*/false, array.mutable_values()));
}

void WorkerHandle::Rejoin(py::handle params) {
  auto lock = BeginCall("rejoin");
  FloatArray array = FloatArray::From(params, "params", ArrayAccess::kWrite, JoinedSize());
  RaiseIfError(ReceiveParameters(/*rejoin=*/true, array.mutable_values()));
}

void WorkerHandle::SetStepHyper(py::handle groups) {
  PyErr_SetString(PyExc_NotImplementedError,
                  "set_step_hyper: per-group hyperparameters need loco::Worker support that this "
                  "build of the client library does not have yet; the servers apply their own "
                  "lr, betas, eps and weight_decay (their flags) to every parameter");
  throw py::error_already_set();
}

uint64_t WorkerHandle::WaitForClusterStep(uint64_t step, double timeout_s) {
  auto lock = BeginCall("wait_for_cluster_step");
  if (!(std::isfinite(timeout_s) && timeout_s >= 0)) {
    throw py::value_error("wait_for_cluster_step: timeout_s=" + std::to_string(timeout_s) +
                          " must be a finite number of seconds >= 0");
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  StatusOr<uint64_t> seen = [&] {
    py::gil_scoped_release release;
    return worker_->WaitForClusterStep(step, deadline);
  }();
  RaiseIfError(seen.status());
  return *seen;
}

void WorkerHandle::Leave() {
  auto lock = BeginCall("leave");
  Status left;
  {
    py::gil_scoped_release release;
    left = worker_->Leave();
  }
  RaiseIfError(left);
}

void WorkerHandle::Close() {
  if (worker_ == nullptr) return;
  if (computing_) {
    throw std::runtime_error("close() was called from inside step_overlapped's compute(ready); "
                             "close the Worker once the step has returned");
  }
  std::unique_ptr<Worker> closing;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(call_mu_);  // a call on another thread ends first
    py::gil_scoped_acquire acquire;
    if (worker_ == nullptr) return;  // closed meanwhile by another thread
    last_.step = worker_->step();
    last_.rank = worker_->rank();
    last_.world_size = worker_->world_size();
    last_.worker_id = worker_->worker_id();
    last_.expired = worker_->expired();
    last_.traffic = worker_->traffic();
    closing = std::move(worker_);
  }
  py::gil_scoped_release release;
  closing.reset();  // leaves, if still joined, with one bounded attempt
}

void WorkerHandle::CloseAtExit() {
  if (worker_ == nullptr) return;
  std::unique_lock<std::mutex> lock(call_mu_, std::try_to_lock);
  if (lock.owns_lock()) {
    lock.unlock();
    Close();
    return;
  }
  Worker* busy = worker_.get();
  py::gil_scoped_release release;
  // Best effort, one bounded attempt; the process is ending either way.
  (void)busy->LeaveNow();
}

uint64_t WorkerHandle::step() const { return worker_ ? worker_->step() : last_.step; }
uint32_t WorkerHandle::rank() const { return worker_ ? worker_->rank() : last_.rank; }
uint32_t WorkerHandle::world_size() const {
  return worker_ ? worker_->world_size() : last_.world_size;
}
uint64_t WorkerHandle::worker_id() const {
  return worker_ ? worker_->worker_id() : last_.worker_id;
}
bool WorkerHandle::expired() const { return worker_ ? worker_->expired() : last_.expired; }
TrafficStats WorkerHandle::traffic() const {
  return worker_ ? worker_->traffic() : last_.traffic;
}

}  // namespace loco::python

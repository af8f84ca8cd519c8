#include "worker_handle.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/host_port.h"
#include "float_array.h"
#include "gil.h"
#include "log_relay.h"
#include "metrics/metrics_text.h"
#include "signal_watch.h"
#include "status_error.h"
#include "worker_options_args.h"

namespace py = pybind11;

namespace loco::python {
namespace {

// How long CloseAtExit waits for an interrupted call to end.
constexpr int kCallEndWaitMs = 1000;

}  // namespace

WorkerHandle::WorkerHandle(const WorkerOptions& options,
                           const std::optional<MetricsEndpointOptions>& metrics) {
  OnWorkerMade();  // from here on the library may log
  StatusOr<std::unique_ptr<Worker>> connected = [&] {
    GilReleased released;
    return Worker::Connect(options);
  }();
  if (!connected.ok()) {
    const Status& refused = connected.status();
    RaiseStatus(Status(refused.code(), WithKeywordNames(refused.message())));
  }
  if (metrics) ServeMetrics(*metrics, (*connected)->metrics_registry());
  worker_ = std::move(*connected);
}

void WorkerHandle::ServeMetrics(const MetricsEndpointOptions& metrics,
                                std::shared_ptr<prometheus::Registry> registry) {
  // The render function holds the registry, not this handle: the server
  // referring back to the handle would keep it from being collected.
  py::cpp_function render([registry = std::move(registry)] {
    std::string text;
    {
      GilReleased released;
      text = MetricsText(*registry);
    }
    return text;
  });
  try {
    metrics_server_ = py::module_::import("loco_ps._metrics_server")
                          .attr("MetricsServer")(render, metrics.host, metrics.port);
  } catch (py::error_already_set& error) {
    if (!error.matches(PyExc_OSError)) throw;
    RaiseStatus(Unavailable("metrics_port: cannot serve metrics on " +
                            JoinHostPort(metrics.host, metrics.port) + ": " +
                            py::str(error.value()).cast<std::string>() +
                            " (is the port in use? choose another metrics_port, or 0 for any "
                            "free one)"));
  }
}

std::optional<std::string> WorkerHandle::metrics_address() const {
  if (metrics_server_.is_none()) return std::nullopt;
  return metrics_server_.attr("address").cast<std::string>();
}

WorkerHandle::~WorkerHandle() { Close(); }

CallSlot::Held WorkerHandle::BeginCall(const char* method) {
  std::optional<CallSlot::Held> held = call_slot_.TryTake();
  if (!held) {
    throw std::runtime_error(std::string(method) +
                             ": another call on this Worker is still running (on another thread, "
                             "or a background step not finished yet); the calls that talk to "
                             "the cluster must come one at a time");
  }
  if (worker_ == nullptr) {
    RaiseStatus(FailedPrecondition(std::string(method) + ": this Worker is closed"));
  }
  return std::move(*held);
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
  // On a thread of its own, so that this one can look for Ctrl-C meanwhile:
  // Join retries an unreachable coordinator for coordinator_outage_ms (5 min
  // by default), and Python runs its signal handlers on this thread only.
  const WatchedCall joined = CallWatchingSignals(
      [&] { return Counted([&] { return worker_->Join(static_cast<size_t>(num_elements)); }); },
      [&] { worker_->InterruptJoin(); }, &exiting_);
  if (joined.status.ok()) num_elements_ = static_cast<size_t>(num_elements);
  if (joined.raised) throw py::error_already_set();
  RaiseIfError(joined.status);
}

Status WorkerHandle::ReceiveParameters(bool rejoin, std::span<float> params) {
  // On a thread of its own, as Join: it may wait for a server that is away
  // (for step_timeout_ms, 5 min by default) and, in a rejoin, retry the
  // coordinator. Ctrl-C ends those waits through the interrupt check (read
  // by that thread) and InterruptJoin.
  std::atomic<bool> interrupted{false};
  worker_->SetInterruptCheck(
      [this, &interrupted] { return interrupted.load() || exiting_.load(); });
  // The caller's buffer is both the offered initial parameters and where
  // the cluster's copy is written, in place (client/worker.h allows it).
  const WatchedCall received = CallWatchingSignals(
      [&] {
        return Counted([&] {
          return rejoin ? worker_->Rejoin(params, params) : worker_->InitParameters(params, params);
        });
      },
      [&] {
        interrupted = true;
        worker_->InterruptJoin();
      },
      &exiting_);
  worker_->SetInterruptCheck(nullptr);
  if (received.raised) throw py::error_already_set();
  return received.status;
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

namespace {

// One (begin, end, lr, beta1, beta2, eps, weight_decay[, update]) tuple
// of set_step_hyper's list, update "adamw" (the default) or "add_mean";
// TypeError naming the entry when it is not one.
HyperGroup ParseHyperGroup(py::handle item, size_t index) {
  const std::string where = "set_step_hyper: groups[" + std::to_string(index) + "]";
  if (!py::isinstance<py::sequence>(item) || py::isinstance<py::str>(item) ||
      (py::len(item) != 7 && py::len(item) != 8)) {
    throw py::type_error(where + " must be a tuple (begin, end, lr, beta1, beta2, eps, "
                         "weight_decay[, update]), not " + std::string(py::str(py::repr(item))));
  }
  const auto entry = py::reinterpret_borrow<py::sequence>(item);
  const auto index_at = [&](size_t k, const char* name) {
    if (!py::isinstance<py::int_>(entry[k]) || entry[k].cast<py::int_>() < py::int_(0)) {
      throw py::type_error(where + ": " + name + " must be an int >= 0, not " +
                           std::string(py::str(py::repr(entry[k]))));
    }
    return entry[k].cast<uint64_t>();
  };
  const auto number_at = [&](size_t k, const char* name) {
    try {
      return py::float_(entry[k]).cast<double>();
    } catch (const py::error_already_set&) {
      throw py::type_error(where + ": " + name + " must be a number, not " +
                           std::string(py::str(py::repr(entry[k]))));
    }
  };
  HyperGroup group;
  group.begin = index_at(0, "begin");
  group.end = index_at(1, "end");
  group.lr = number_at(2, "lr");
  group.beta1 = number_at(3, "beta1");
  group.beta2 = number_at(4, "beta2");
  group.eps = number_at(5, "eps");
  group.weight_decay = number_at(6, "weight_decay");
  if (py::len(item) == 8) {
    const py::object update = entry[7];
    const bool known = py::isinstance<py::str>(update) &&
                       (update.cast<std::string>() == "adamw" ||
                        update.cast<std::string>() == "add_mean");
    if (!known) {
      throw py::type_error(where + ": update must be \"adamw\" or \"add_mean\", not " +
                           std::string(py::str(py::repr(update))));
    }
    group.add_mean = update.cast<std::string>() == "add_mean";
  }
  return group;
}

}  // namespace

void WorkerHandle::SetStepHyper(py::handle groups) {
  auto lock = BeginCall("set_step_hyper");
  if (!py::isinstance<py::sequence>(groups) || py::isinstance<py::str>(groups)) {
    throw py::type_error("set_step_hyper: groups must be a list of (begin, end, lr, beta1, "
                         "beta2, eps, weight_decay) tuples");
  }
  std::vector<HyperGroup> parsed;
  const auto sequence = py::reinterpret_borrow<py::sequence>(groups);
  for (size_t i = 0; i < sequence.size(); ++i) parsed.push_back(ParseHyperGroup(sequence[i], i));
  // No RPC: the groups are checked and cut per shard here, and travel with
  // the next steps' pushes. A bad value is the caller's argument, so a
  // ValueError, not a cluster error.
  const Status set = worker_->SetStepHyper(parsed);
  if (set.code() == StatusCode::kInvalidArgument) throw py::value_error(set.message());
  RaiseIfError(set);
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
  // Ctrl-C ends the wait (the check takes the GIL to run the signal
  // handlers, as a step's does); so does the exit handler, without it.
  worker_->SetInterruptCheck([this] { return ExitingOrSignalRaised(); });
  StatusOr<uint64_t> seen =
      CallReleased([&] { return worker_->WaitForClusterStep(step, deadline); });
  worker_->SetInterruptCheck(nullptr);
  if (PyErr_Occurred() != nullptr) throw py::error_already_set();
  RaiseIfError(seen.status());
  return *seen;
}

void WorkerHandle::Leave() {
  auto lock = BeginCall("leave");
  Status left;
  {
    GilReleased released;
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
  if (InterpreterFinalizing()) {
    // From a __del__ during finalization: a call of a daemon thread may be
    // parked for good (gil.h), holding the call slot; never wait for it.
    CloseAtExit();
    return;
  }
  if (std::shared_ptr<BackgroundStep> step = background_.lock()) {
    step->Abort("the Worker was closed during the step");
  }
  std::optional<CallSlot::Held> held;
  {
    GilReleased released;
    held.emplace(call_slot_.Take());  // a call on another thread ends first
  }
  CloseHolding(std::move(*held));
}

void WorkerHandle::CloseHolding(CallSlot::Held held) {
  if (worker_ == nullptr) return;  // closed meanwhile by another thread
  last_.step = worker_->step();
  last_.rank = worker_->rank();
  last_.world_size = worker_->world_size();
  last_.worker_id = worker_->worker_id();
  last_.expired = worker_->expired();
  last_.traffic = worker_->traffic();
  // First, while Python runs: its serving thread ends, and the port is
  // free again once close() returns. Once the interpreter finalizes that
  // thread can no longer run, so the server is only dropped with the
  // process.
  py::object server = std::exchange(metrics_server_, py::none());
  if (!server.is_none() && !InterpreterFinalizing()) server.attr("close")();
  std::unique_ptr<Worker> closing = std::move(worker_);
  held.Release();
  GilReleased released;
  closing.reset();  // leaves, if still joined, with one bounded attempt
}

void WorkerHandle::CloseAtExit() {
  if (worker_ == nullptr) return;
  // Taken here, not by Close: a daemon thread's call that started between
  // this look and Close's wait would be waited for.
  if (std::optional<CallSlot::Held> held = call_slot_.TryTake()) {
    CloseHolding(std::move(*held));
    return;
  }
  Worker* busy = worker_.get();
  exiting_ = true;  // a call in progress: its interrupt check says stop
  const std::shared_ptr<BackgroundStep> background = background_.lock();
  if (background) background->InterruptAtExit();
  GilReleased released;
  // A join in progress ends (it would keep retrying the coordinator, or
  // waiting for the cluster, while the process tears down) and leaves
  // again. Best effort, one bounded attempt; the process is ending either way.
  busy->InterruptJoin();
  (void)busy->LeaveNow();
  // The interrupted call ends within about 100 ms plus one RPC in flight
  // (client/worker.h); bounded, as every wait at exit.
  for (int waited_ms = 0; CallRunning(background.get()) && waited_ms < kCallEndWaitMs;
       waited_ms += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool WorkerHandle::call_running() const { return CallRunning(background_.lock().get()); }

bool WorkerHandle::CallRunning(const BackgroundStep* background) const {
  return calls_running_.load() > 0 || (background != nullptr && !background->thread_done());
}

bool WorkerHandle::ExitingOrSignalRaised() const { return exiting_.load() || PythonSignalRaised(); }

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

// loco_ps._core: the pybind11 extension module over the C++ client library
// (client/worker.h). It defines _core.Worker (python/src/worker_handle.h)
// and the `ready` callable of its overlapped step; the pure-Python package
// loco_ps (python/loco_ps/) builds on it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>

#include "background_step.h"
#include "client/step_hyper.h"
#include "gradient_ready_callback.h"
#include "log_relay.h"
#include "result_dicts.h"
#include "status_error.h"
#include "worker_handle.h"
#include "worker_options_args.h"

namespace py = pybind11;
using loco::python::BackgroundStep;
using loco::python::GradientReadyCallback;
using loco::python::WorkerHandle;

namespace {

constexpr const char* kModuleDoc = R"(The C++ client of LoCo-PS, for Python.

Worker joins a LoCo-PS cluster and runs synchronous steps: it compresses the
gradient per shard, pushes it to every parameter server, and writes the
servers' updated parameters back into your numpy array in place. The
arrays cross without a copy: pass 1-D, C-contiguous float32 numpy arrays
(a contiguous CPU torch tensor's .numpy() shares its memory).

Failed calls raise loco_ps.ClusterError subclasses (loco_ps.errors); bad
arguments raise TypeError or ValueError before anything is sent. Every call
that talks to the cluster releases the GIL.)";

constexpr const char* kWorkerDoc = R"(A worker of a LoCo-PS cluster.

Worker(coordinator, codec="loco", bits=4, auth_token_file=None,
       insecure=False, tls_ca=None, name=None, metrics_port=None,
       metrics_host="127.0.0.1", **advanced)

coordinator: "host:port" of the cluster's coordinator.
codec: how gradients are pushed: "fp32", "bf16", "naive", "ef" or "loco"
    (LoCo: `bits`-bit quantisation with error compensation).
bits: bits per gradient element of the block codecs (naive, ef, loco);
    fp32 and bf16 ignore it (and block_size).
auth_token_file: file holding the cluster's bearer token, if it needs one.
insecure: plaintext gRPC, for a trusted network (a local loco_ps.Cluster).
    Otherwise TLS: tls_ca names the CA bundle that signed the servers'
    certificates (advanced: tls_cert, tls_key for mutual TLS,
    tls_server_name).
name: free text shown in the coordinator's logs.
metrics_port: serve this worker's Prometheus metrics (bytes on the wire
    and in fp32, RPC and step durations, the step's phases, memory) on
    http://metrics_host:metrics_port/metrics until close(), as loco-worker's
    --metrics-port does; 0 binds any free port (see metrics_address), None
    serves none. metrics_host: the address it listens on (loopback by
    default: metrics are not for the world).
advanced: WorkerOptions fields by name (ADVANCED_OPTIONS), e.g.
    rpc_timeout_ms, step_timeout_ms, join_timeout_ms, pull_wait_ms,
    max_retries, block_size, push_parts. An unknown keyword raises
    TypeError.

Creating a Worker checks the options (InvalidArgumentError) but sends
nothing. Then: join(num_elements), init_parameters(params), and
step(grads, params) once per training step; leave() and close() at the end
(a joined worker is also closed when it is garbage collected and at
interpreter exit). Usable as a context manager, which closes it.

The calls that talk to the cluster must come one at a time; a call made
while another thread's call is running raises RuntimeError. The properties
may be read from any thread.)";

constexpr const char* kBackgroundStepDoc = R"(An overlapped step running on a thread of its own.

Worker.start_background_step returns it. Mark each part of the gradient
final as it is (mark_ready: the final suffix is compressed and pushed while
the caller goes on), then finish() it, or abort() it. The step's thread
never takes the GIL. Dropped without either, it is aborted.)";

void BindGradientReady(py::module_& m) {
  py::class_<GradientReadyCallback>(m, "GradientReady", R"(The `ready` passed to the `compute` of
Worker.step_overlapped. ready(ready_from) says that grads[ready_from:] is
final: those elements are compressed and pushed at once while compute goes
on. Valid only while compute runs.)")
      .def("__call__", &GradientReadyCallback::operator(), py::arg("ready_from"),
           "Marks grads[ready_from:] final (0 <= ready_from <= len(grads)).");
}

// A part index of a BackgroundStep, checked: IndexError outside
// [0, num_parts).
size_t PartIndex(const BackgroundStep& step, int64_t part) {
  if (part < 0 || static_cast<uint64_t>(part) >= step.num_parts()) {
    throw py::index_error("part " + std::to_string(part) + " is outside [0, " +
                          std::to_string(step.num_parts()) + "), the step's parts");
  }
  return static_cast<size_t>(part);
}

void BindBackgroundStep(py::module_& m) {
  py::class_<BackgroundStep, std::shared_ptr<BackgroundStep>>(m, "BackgroundStep",
                                                              kBackgroundStepDoc)
      .def_property_readonly("num_parts", &BackgroundStep::num_parts, "The parts of the layout.")
      .def(
          "is_ready",
          [](const BackgroundStep& step, int64_t part) {
            return step.IsReady(PartIndex(step, part));
          },
          py::arg("part"), "Whether the part was marked final.")
      .def(
          "mark_ready",
          [](BackgroundStep& step, int64_t part) { return step.MarkReady(PartIndex(step, part)); },
          py::arg("part"), R"(Part `part` of the gradient is final (never written again in this step).
Returns False, changing nothing, when it was marked already. Cheap: no
wait for the step's thread.)")
      .def(
          "finish",
          [](BackgroundStep& step) {
            loco::StatusOr<loco::StepResult> result = step.Finish();
            loco::python::RaiseIfError(result.status());
            return loco::python::StepResultDict(*result);
          },
          R"(The whole gradient is final (parts never marked included): waits for the step
and returns its result dict, as Worker.step. A failed step raises its
ClusterError; after finish() or abort(), FailedPreconditionError. Ctrl-C
while it waits for a server that is away, or resynchronises, ends the step
within about 0.1 s and raises KeyboardInterrupt.)")
      .def("abort", &BackgroundStep::Abort, py::arg("reason"),
           R"(Fails the step (a shard pushed in part is cancelled; one pushed whole stays
pushed) and waits for its thread. Nothing happens once the step has ended.)")
      .def_property_readonly("running", &BackgroundStep::running,
                             "Neither finish() nor abort() has run.");
}

// join, init_parameters, rejoin, wait_for_cluster_step, leave, close and
// the context manager: the worker's place in the cluster.
void BindMembershipCalls(py::class_<WorkerHandle>& worker, py::object joined_workers) {
  worker
      .def(
          "join",
          [joined_workers](py::object self, int64_t num_elements) {
            // Before the call: a join admitted by the coordinator that still
            // waits for the cluster (on a daemon thread) leaves at exit too.
            joined_workers.attr("add")(self);
            self.cast<WorkerHandle&>().Join(num_elements);
          },
          py::arg("num_elements"),
          R"(Joins the cluster with a model of num_elements float32 parameters.

The first worker to join fixes the model size; a different size is refused
(InvalidArgumentError or FailedPreconditionError). Retries an unreachable
coordinator for coordinator_outage_ms, then waits up to join_timeout_ms for
the cluster to be ready; Ctrl-C ends either wait within about 0.1 s and
raises KeyboardInterrupt.)")
      .def("init_parameters", &WorkerHandle::InitParameters, py::arg("params"),
           R"(Offers params as the initial parameters, then overwrites params in place with the
cluster's copy.

The first offer wins: a later worker (or a restarted one) receives the
parameters the cluster already holds, and its version property becomes the
cluster's step. params: 1-D float32, C-contiguous, writeable, of the
joined size. A server that is away is waited for up to step_timeout_ms;
Ctrl-C ends that wait within about 0.1 s and raises KeyboardInterrupt.)")
      .def(
          "rejoin",
          [joined_workers](py::object self, py::handle params) {
            joined_workers.attr("add")(self);
            self.cast<WorkerHandle&>().Rejoin(params);
          },
          py::arg("params"), R"(Joins again after the cluster expired this worker (expired is True,
e.g. it stalled past the heartbeat timeout), then overwrites params in place
with the cluster's copy, as init_parameters does. Ctrl-C ends its waits
(for the coordinator, for the servers) and raises KeyboardInterrupt.)")
      .def("wait_for_cluster_step", &WorkerHandle::WaitForClusterStep, py::arg("step"),
           py::arg("timeout_s"),
           R"(Before join: waits until the cluster's step is >= step and returns the step seen.
DeadlineExceededError after timeout_s seconds. Ctrl-C ends the wait and raises
KeyboardInterrupt.)")
      .def("leave", &WorkerHandle::Leave,
           "Leaves the cluster, so that its steps stop waiting for this worker. Idempotent.")
      .def("close", &WorkerHandle::Close,
           R"(Releases the worker, leaving the cluster first if still joined (one bounded
attempt, no retries). Idempotent; later calls raise FailedPreconditionError.)")
      .def("_close_at_exit", &WorkerHandle::CloseAtExit,
           R"(For exit handlers: close(), or, while a call of another thread is in progress
(a daemon thread's step), only tells the coordinator at once that this worker
leaves, without waiting for that call.)")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](WorkerHandle& handle, py::args) { handle.Close(); });
}

// step, step_overlapped, start_background_step and set_step_hyper: training.
void BindStepCalls(py::class_<WorkerHandle>& worker) {
  worker
      .def("step", &WorkerHandle::Step, py::arg("grads"), py::arg("params"),
           R"(One synchronous training step.

Pushes grads (read only; 1-D float32 of the model's size), waits for the
servers' AdamW update over every worker's mean gradient, and writes the new
parameters into params in place. Returns a dict: step, resynced, nonfinite,
error_sq_norm, push/pull wire and fp32 bytes, seconds, compute_seconds.
Ctrl-C while it waits for a server that is away, or resynchronises (after a
refused push), ends the step within about 0.1 s and raises KeyboardInterrupt
(the step failed).)")
      .def("step_overlapped", &WorkerHandle::StepOverlapped, py::arg("compute"),
           py::arg("grads"), py::arg("params"),
           R"(The same step, overlapped with the gradient's computation.

compute(ready) runs on this thread (with the GIL) and fills grads in place;
calling ready(ready_from) as parts grads[ready_from:] become final (a
backward pass finishes the last layers first) lets those parts be
compressed and pushed meanwhile. params must not be written during compute;
the new parameters land in it after compute returns. An exception raised by
compute abandons the step and is re-raised here.)")
      .def("start_background_step", &WorkerHandle::StartBackgroundStep, py::arg("grads"),
           py::arg("params"), py::arg("part_begins"), py::keep_alive<0, 1>(),
           R"(Starts the same step on a thread of its own and returns its BackgroundStep.

The gradient is laid out in parts: part i is grads[part_begins[i]:
part_begins[i + 1]] (the last to the end; part_begins ascending from 0).
Mark each part final with step.mark_ready(i) as it is: each time the final
parts grow as a suffix of the layout (a backward pass finishes the last
layers first), that suffix is compressed and pushed. step.finish() then
returns the result, params written in place; params must not be written
before. Until the step has ended, other calls on this Worker raise
RuntimeError; close() aborts it. No Python runs on the step's thread, so
marks from gradient hooks never wait for the GIL.)")
      .def("set_step_hyper", &WorkerHandle::SetStepHyper, py::arg("groups"),
           R"(Per-group AdamW hyperparameters for the following steps: a list of
(begin, end, lr, beta1, beta2, eps, weight_decay[, update]) tuples covering
[0, num_elements) in order. update is "adamw" (the default) or "add_mean":
the servers then add the step's mean push to the group's elements instead
of stepping AdamW (values kept equal on every worker, such as BatchNorm
statistics: push value minus the copy held, receive the mean). Every push of a later step carries them and
the servers step with them instead of their flags; all workers of a step
must send the same values (a disagreeing push fails its step with
InvalidArgumentError, and its worker withdraws from that step so that the
others' step completes without it). An empty list goes back to the servers' flags.
After join; kept across rejoin. Bad groups raise ValueError (TypeError for
a malformed entry) and change nothing.)");
}

void BindWorkerProperties(py::class_<WorkerHandle>& worker) {
  worker
      // Not "step": that name is the method (as C++'s Step and step() cannot
      // share one in Python).
      .def_property_readonly("version", &WorkerHandle::step,
                             "The version of the parameters held, which is the step the next "
                             "step() pushes (the cluster's step after init_parameters).")
      .def_property_readonly("rank", &WorkerHandle::rank, "This worker's rank in the cluster.")
      .def_property_readonly("world_size", &WorkerHandle::world_size,
                             "Workers in the cluster when this one last heard.")
      .def_property_readonly("worker_id", &WorkerHandle::worker_id,
                             "The id the coordinator gave this worker (0 before join).")
      .def_property_readonly("expired", &WorkerHandle::expired,
                             "The coordinator removed this worker: call rejoin(params).")
      .def_property_readonly(
          "traffic",
          [](const WorkerHandle& handle) { return loco::python::TrafficDict(handle.traffic()); },
          "Bytes pushed and pulled since join (wire and fp32-equivalent), steps, resyncs.")
      .def_property_readonly("num_elements", &WorkerHandle::num_elements,
                             "The model size joined with (0 before join).")
      .def_property_readonly("closed", &WorkerHandle::closed, "close() has run.")
      .def_property_readonly("metrics_address", &WorkerHandle::metrics_address,
                             "\"host:port\" of this worker's /metrics endpoint (the port bound "
                             "when metrics_port=0 asked for any free one); None without "
                             "metrics_port, or once closed.")
      .def_property_readonly("_call_running", &WorkerHandle::call_running,
                             "A join, init_parameters, rejoin, wait_for_cluster_step, step or "
                             "background step is running in the client library (for tests).");
}

// Workers that joined, or are joining, are closed at interpreter exit,
// before the interpreter tears down: a worker's heartbeat thread must not
// outlive it, and a member must not hold its place. The set is
// weak: a worker garbage collected earlier closes in its destructor. One
// busy on another thread only leaves (WorkerHandle::CloseAtExit).
// _close_joined_workers is also called by loco_ps.Cluster's exit handler,
// so that workers leave before a local cluster stops, whichever handler
// was registered first.
void CloseJoinedWorkersAtExit(py::module_& m) {
  m.attr("_joined_workers") = py::module_::import("weakref").attr("WeakSet")();
  py::object joined_workers = m.attr("_joined_workers");
  m.def("_close_joined_workers", [joined_workers] {
    for (py::handle worker : py::list(joined_workers)) {
      worker.cast<WorkerHandle&>().CloseAtExit();
    }
  });
  py::module_::import("atexit").attr("register")(m.attr("_close_joined_workers"));
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = kModuleDoc;
  m.attr("ADVANCED_OPTIONS") = py::tuple(py::cast(loco::python::AdvancedOptionNames()));
  // set_step_hyper's groups may number at most this (one push carries them):
  // loco_ps.torch refuses more param groups before it joins.
  m.attr("MAX_HYPER_GROUPS") = loco::MaxHyperGroupsPerPush();
  loco::python::BindLogRelay(m);
  BindGradientReady(m);
  BindBackgroundStep(m);
  py::class_<WorkerHandle> worker(m, "Worker", kWorkerDoc);
  worker.def(
      py::init([](std::string coordinator, std::string codec, int bits, py::object auth_token_file,
                  bool insecure, py::object tls_ca, py::object name, py::object metrics_port,
                  std::string metrics_host, const py::kwargs& advanced) {
        loco::python::WorkerArgs args;
        args.coordinator = std::move(coordinator);
        args.codec = std::move(codec);
        args.bits = bits;
        args.auth_token_file = std::move(auth_token_file);
        args.insecure = insecure;
        args.tls_ca = std::move(tls_ca);
        args.name = std::move(name);
        const loco::WorkerOptions options = loco::python::MakeWorkerOptions(args, advanced);
        return std::make_unique<WorkerHandle>(
            options, loco::python::MetricsArgs(metrics_port, metrics_host));
      }),
      py::arg("coordinator"), py::arg("codec") = "loco", py::arg("bits") = 4,
      py::arg("auth_token_file") = py::none(), py::arg("insecure") = false,
      py::arg("tls_ca") = py::none(), py::arg("name") = py::none(),
      py::arg("metrics_port") = py::none(), py::arg("metrics_host") = "127.0.0.1");
  CloseJoinedWorkersAtExit(m);
  BindMembershipCalls(worker, m.attr("_joined_workers"));
  BindStepCalls(worker);
  BindWorkerProperties(worker);
}

#include "log_relay.h"

#include <Python.h>

#include <cstddef>
#include <memory>
#include <utility>

#include "common/log.h"
#include "gil.h"
#include "log_queue.h"

namespace py = pybind11;

namespace loco::python {
namespace {

// Lines that may wait undelivered. A line is a hundred bytes or so: a few
// MB at most, and far more than the library logs in the seconds a long
// GIL-holding call might keep the deliverer from running.
constexpr size_t kQueueCapacity = 10000;

// The queue the installed sink feeds (null before _log_start). Read and
// replaced only with the GIL held (from the _log_* functions); the sink
// holds its own reference. Never destroyed: see _log_start(after_fork).
std::shared_ptr<LogQueue>& CurrentQueue() {
  static auto* const current = new std::shared_ptr<LogQueue>;
  return *current;
}

void Start(bool after_fork) {
  std::shared_ptr<LogQueue>& current = CurrentQueue();
  if (after_fork && current != nullptr) {
    // In the child of a fork, the parent's queue may have been locked by a
    // thread that does not exist here, and its condition variable counts
    // the parent's waiting deliverer: never touch it again. Its memory is
    // left as it is (a reference kept forever) rather than destroyed.
    static_cast<void>(new std::shared_ptr<LogQueue>(std::move(current)));
  }
  // A repeated start does nothing; a stopped queue is replaced (its last
  // lines were taken by whoever stopped it).
  if (current != nullptr && !current->closed()) return;
  auto queue = std::make_shared<LogQueue>(kQueueCapacity);
  current = queue;
  SetLogSink([queue](const LogRecord& record) { queue->Push(record); });
}

void Stop() {
  SetLogSink(nullptr);
  if (const std::shared_ptr<LogQueue>& current = CurrentQueue()) current->Close();
}

bool WaitForLines() {
  std::shared_ptr<LogQueue> queue = CurrentQueue();
  // Once stopped (at exit), never let go of the GIL: a thread that takes it
  // back while the interpreter finalizes is parked for good (gil.h).
  if (queue == nullptr || queue->closed()) return false;
  GilReleased released;
  return queue->Wait();
}

py::tuple TakeLines() {
  LogQueue::Batch batch;
  if (const std::shared_ptr<LogQueue>& queue = CurrentQueue()) batch = queue->Take();
  py::list lines(batch.lines.size());
  for (size_t i = 0; i < batch.lines.size(); ++i) {
    const LogQueue::Line& line = batch.lines[i];
    // The messages quote peers and files: bytes that are not UTF-8 become
    // U+FFFD rather than failing the whole batch.
    py::object message = py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(
        line.message.data(), static_cast<Py_ssize_t>(line.message.size()), "replace"));
    if (!message) throw py::error_already_set();
    lines[i] = py::make_tuple(static_cast<int>(line.level), line.time_s, std::move(message));
  }
  return py::make_tuple(std::move(lines), batch.dropped);
}

}  // namespace

void OnWorkerMade() {
  try {
    py::module_::import("loco_ps._native_log").attr("_worker_made")();
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("loco_ps: starting the delivery of the library's log lines");
  }
}

void BindLogRelay(py::module_& m) {
  m.def("_log_start", &Start, py::arg("after_fork") = false,
        "Sends the C++ library's log lines to a queue (_log_take) instead of fd 2. "
        "after_fork=True in the child of a fork: a fresh queue, the parent's abandoned.");
  m.def("_log_stop", &Stop,
        "Sends the C++ library's log lines to fd 2 again; wakes _log_wait. The lines still "
        "queued stay for _log_take.");
  m.def("_log_wait", &WaitForLines,
        "Waits, the GIL released, until lines are queued (True) or _log_stop ran (False).");
  m.def("_log_take", &TakeLines,
        "([(level, time, message), ...], dropped): the queued lines, oldest first (level 0 "
        "info, 1 warning, 2 error; time as time.time()), and how many older ones were "
        "dropped because the queue was full.");
}

}  // namespace loco::python

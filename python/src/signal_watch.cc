#include "signal_watch.h"

#include <pybind11/pybind11.h>

#include <future>
#include <thread>

namespace py = pybind11;

namespace loco::python {

bool PythonSignalRaised() {
  py::gil_scoped_acquire acquire;
  return PyErr_CheckSignals() != 0;
}

bool WaitWatchingSignals(const std::function<bool(std::chrono::milliseconds)>& finished,
                         const std::function<void()>& on_raise) {
  while (!finished(kSignalCheckPeriod)) {
    if (PythonSignalRaised()) {
      on_raise();
      return true;
    }
  }
  return false;
}

WatchedCall CallWatchingSignals(const std::function<Status()>& call,
                                const std::function<void()>& on_raise) {
  WatchedCall watched;
  std::promise<void> finished;
  std::future<void> done = finished.get_future();
  py::gil_scoped_release release;
  std::thread calling([&] {
    watched.status = call();
    finished.set_value();
  });
  const auto returned = [&](std::chrono::milliseconds slice) {
    return done.wait_for(slice) == std::future_status::ready;
  };
  watched.raised = WaitWatchingSignals(returned, on_raise);
  if (watched.raised) {
    while (!returned(kSignalCheckPeriod)) on_raise();
  }
  calling.join();
  return watched;
}

}  // namespace loco::python

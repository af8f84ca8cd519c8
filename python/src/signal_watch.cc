#include "signal_watch.h"

#include <pybind11/pybind11.h>

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

}  // namespace loco::python

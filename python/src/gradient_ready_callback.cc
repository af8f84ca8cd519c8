#include "gradient_ready_callback.h"

#include <string>

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace loco::python {

void GradientReadyCallback::operator()(int64_t ready_from) const {
  if (ready_ == nullptr) {
    throw std::runtime_error("ready() was called after the gradient computation returned; it "
                             "is valid only during step_overlapped's compute(ready)");
  }
  if (ready_from < 0 || static_cast<uint64_t>(ready_from) > num_elements_) {
    throw py::value_error("ready(ready_from): ready_from=" + std::to_string(ready_from) +
                          " is outside [0, " + std::to_string(num_elements_) +
                          "], the gradient's elements");
  }
  (*ready_)(static_cast<size_t>(ready_from));
}

}  // namespace loco::python

#include "status_error.h"

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace loco::python {

void RaiseStatus(const Status& status) {
  // Imported on every failure rather than cached in a static: failures are
  // rare, the import is a dictionary look-up once loaded, and the module
  // keeps no process-wide state of its own.
  py::object errors = py::module_::import("loco_ps.errors");
  py::object error = errors.attr("from_status")(StatusCodeName(status.code()), status.message());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

}  // namespace loco::python

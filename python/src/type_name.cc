#include "type_name.h"

namespace py = pybind11;

namespace loco::python {

std::string TypeName(py::handle value) {
  py::handle type(reinterpret_cast<PyObject*>(Py_TYPE(value.ptr())));
  auto module = py::str(type.attr("__module__")).cast<std::string>();
  auto name = py::str(type.attr("__qualname__")).cast<std::string>();
  return module == "builtins" ? name : module + "." + name;
}

}  // namespace loco::python

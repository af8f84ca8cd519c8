#include "float_array.h"

#include <string>

#include <pybind11/numpy.h>

#include "type_name.h"

namespace py = pybind11;

namespace loco::python {
namespace {

// numpy's NPY_ARRAY_ALIGNED flag (part of its stable C API).
constexpr int kNumpyAligned = 0x0100;

}  // namespace

FloatArray FloatArray::From(py::handle object, const char* name, ArrayAccess access,
                            std::optional<size_t> expected_size) {
  const std::string arg(name);
  if (!py::isinstance<py::array>(object)) {
    std::string hint;
    if (TypeName(object) == "torch.Tensor") {
      hint = " (pass tensor.numpy() of a contiguous CPU float32 tensor: it shares the memory)";
    }
    throw py::type_error(arg + " must be a numpy.ndarray of float32, got " + TypeName(object) +
                         hint);
  }
  auto array = py::reinterpret_borrow<py::array>(object);
  const py::dtype dtype = array.dtype();
  if (dtype.kind() != 'f' || dtype.itemsize() != 4 || !dtype.attr("isnative").cast<bool>()) {
    throw py::type_error(arg + " must have dtype float32, got " +
                         py::str(py::handle(dtype)).cast<std::string>() + " (convert it with " + arg +
                         ".astype(numpy.float32))");
  }
  if (array.ndim() != 1) {
    throw py::value_error(arg + " must be 1-D, got " + std::to_string(array.ndim()) +
                          " dimensions (pass " + arg + ".reshape(-1) of a contiguous array)");
  }
  if (!(array.flags() & py::array::c_style)) {
    throw py::value_error(arg + " must be C-contiguous (a strided view cannot be written in "
                          "place; pass numpy.ascontiguousarray(" + arg + ") and use that copy)");
  }
  if (!(array.flags() & kNumpyAligned)) {
    throw py::value_error(arg + " must be aligned to its float32 elements");
  }
  if (access == ArrayAccess::kWrite && !array.writeable()) {
    throw py::value_error(arg + " is read-only, but the worker writes the new parameters into "
                          "it in place; pass a writeable array");
  }
  const auto size = static_cast<size_t>(array.size());
  if (expected_size && size != *expected_size) {
    throw py::value_error(arg + " has " + std::to_string(size) +
                          " elements; the worker joined with a model of " +
                          std::to_string(*expected_size));
  }
  py::buffer_info info = array.request(access == ArrayAccess::kWrite);
  auto* data = static_cast<float*>(info.ptr);
  return FloatArray(std::move(info), data, size);
}

bool Overlap(std::span<const float> a, std::span<const float> b) {
  if (a.empty() || b.empty()) return false;
  return a.data() < b.data() + b.size() && b.data() < a.data() + a.size();
}

}  // namespace loco::python

// TypeName: how error messages name the type of a Python value the caller
// passed ("torch.Tensor", "str", "numpy.ndarray").
#pragma once

#include <string>

#include <pybind11/pybind11.h>

namespace loco::python {

// The type's qualified name, prefixed with its module unless builtin.
// GIL held.
std::string TypeName(pybind11::handle value);

}  // namespace loco::python

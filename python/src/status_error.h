// The edge between loco::Status and Python exceptions: a failed status
// becomes an exception of the loco_ps.ClusterError family (defined in
// loco_ps/errors.py, which maps the status code's name to the class),
// carrying the status message and the code's name.
#pragma once

#include "common/status.h"

namespace loco::python {

// Raises (throws pybind11::error_already_set) the loco_ps exception for
// `status`, which must not be OK. Call with the GIL held.
[[noreturn]] void RaiseStatus(const Status& status);

// Raises for a non-OK `status`; returns for OK. Call with the GIL held.
inline void RaiseIfError(const Status& status) {
  if (!status.ok()) RaiseStatus(status);
}

}  // namespace loco::python

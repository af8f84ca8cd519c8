#include "result_dicts.h"

namespace py = pybind11;

namespace loco::python {

py::dict StepResultDict(const StepResult& result) {
  py::dict out;
  out["step"] = result.step;
  out["resynced"] = result.resynced;
  out["nonfinite"] = result.nonfinite;
  out["error_sq_norm"] = result.error_sq_norm;
  out["push_wire_bytes"] = result.push_wire_bytes;
  out["push_fp32_bytes"] = result.push_fp32_bytes;
  out["pull_wire_bytes"] = result.pull_wire_bytes;
  out["pull_fp32_bytes"] = result.pull_fp32_bytes;
  out["seconds"] = result.seconds;
  out["compute_seconds"] = result.compute_seconds;
  return out;
}

py::dict TrafficDict(const TrafficStats& traffic) {
  py::dict out;
  out["push_wire_bytes"] = traffic.push_wire_bytes;
  out["push_fp32_bytes"] = traffic.push_fp32_bytes;
  out["pull_wire_bytes"] = traffic.pull_wire_bytes;
  out["pull_fp32_bytes"] = traffic.pull_fp32_bytes;
  out["steps"] = traffic.steps;
  out["resyncs"] = traffic.resyncs;
  out["nonfinite"] = traffic.nonfinite;
  return out;
}

}  // namespace loco::python

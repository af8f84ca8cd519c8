// How _core.Worker's arguments become a loco::WorkerOptions: the common
// settings as named arguments, the rest ("advanced") as keywords named like
// the WorkerOptions fields they set.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "client/worker_options.h"
#include "metrics/metrics_endpoint.h"

namespace loco::python {

// The named arguments of _core.Worker. Path arguments accept str or
// os.PathLike; None means "not set".
struct WorkerArgs {
  std::string coordinator;
  std::string codec = "loco";
  int bits = 4;
  pybind11::object auth_token_file = pybind11::none();
  bool insecure = false;
  pybind11::object tls_ca = pybind11::none();
  pybind11::object name = pybind11::none();
};

// The /metrics endpoint _core.Worker's metrics_port and metrics_host ask
// for: none for a port of None; a port that is an int (not a bool) in
// [0, 65535], 0 meaning any free port, on a host CheckHost accepts.
// TypeError or ValueError naming the keyword otherwise. GIL held.
std::optional<MetricsEndpointOptions> MetricsArgs(pybind11::handle port, const std::string& host);

// Builds the options. `advanced` holds keywords named after WorkerOptions
// fields (AdvancedOptionNames()); an unknown keyword raises TypeError naming
// it, a value of the wrong type TypeError, an integer out of the field's
// range ValueError. Values are not checked for sense here: Worker::Connect
// validates them (InvalidArgumentError naming the field). GIL held.
WorkerOptions MakeWorkerOptions(const WorkerArgs& args, const pybind11::kwargs& advanced);

// A refusal of the options as a Python caller should read it: the security
// checks (common/transport_security_options.h) name the command-line flags
// (--tls-ca, --insecure, ...), which are this module's keywords (tls_ca,
// insecure=True, ...). Other messages come back unchanged.
std::string WithKeywordNames(const std::string& message);

// The keywords MakeWorkerOptions accepts in `advanced`, sorted.
std::vector<std::string> AdvancedOptionNames();

}  // namespace loco::python

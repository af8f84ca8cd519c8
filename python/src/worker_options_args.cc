#include "worker_options_args.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <pybind11/stl.h>

#include "client/push_codec.h"
#include "common/host_port.h"
#include "status_error.h"
#include "type_name.h"

namespace py = pybind11;

namespace loco::python {
namespace {

[[noreturn]] void WrongType(py::handle value, const std::string& name, const char* wanted) {
  throw py::type_error("Worker(): " + name + " must be " + wanted + ", got " + TypeName(value));
}

bool BoolArg(py::handle value, const std::string& name) {
  if (!PyBool_Check(value.ptr())) WrongType(value, name, "a bool");
  return value.ptr() == Py_True;
}

// Any Python int (or object with __index__, such as a numpy integer) that
// fits `Int`; a bool is refused, as it is almost always a slip.
template <typename Int>
Int IntArg(py::handle value, const std::string& name) {
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr())) WrongType(value, name, "an int");
  auto integer = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!integer) throw py::error_already_set();
  const auto out_of_range = [&] {
    PyErr_Clear();
    throw py::value_error("Worker(): " + name + "=" + py::str(integer).cast<std::string>() +
                          " is out of range (" + std::to_string(std::numeric_limits<Int>::min()) +
                          " to " + std::to_string(std::numeric_limits<Int>::max()) + ")");
  };
  if constexpr (std::is_signed_v<Int>) {
    int overflow = 0;
    const long long wide = PyLong_AsLongLongAndOverflow(integer.ptr(), &overflow);
    if (overflow != 0 || wide < std::numeric_limits<Int>::min() ||
        wide > std::numeric_limits<Int>::max()) {
      out_of_range();
    }
    return static_cast<Int>(wide);
  } else {
    const unsigned long long wide = PyLong_AsUnsignedLongLong(integer.ptr());
    if (PyErr_Occurred() != nullptr || wide > std::numeric_limits<Int>::max()) out_of_range();
    return static_cast<Int>(wide);
  }
}

float FloatArg(py::handle value, const std::string& name) {
  if (PyBool_Check(value.ptr()) || !(PyFloat_Check(value.ptr()) || PyIndex_Check(value.ptr()))) {
    WrongType(value, name, "a float");
  }
  const double wide = PyFloat_AsDouble(value.ptr());
  if (PyErr_Occurred() != nullptr) throw py::error_already_set();
  return static_cast<float>(wide);
}

// str or os.PathLike (a path), as a string.
std::string StringArg(py::handle value, const std::string& name) {
  py::object text;
  try {
    text = py::module_::import("os").attr("fspath")(value);
  } catch (const py::error_already_set&) {
    WrongType(value, name, "a str or os.PathLike");
  }
  if (!py::isinstance<py::str>(text)) WrongType(value, name, "a str or os.PathLike");
  return text.cast<std::string>();
}

std::string OptionalStringArg(const py::object& value, const std::string& name) {
  return value.is_none() ? std::string() : StringArg(value, name);
}

// Sets WorkerOptions::*Field from a Python value of the field's type.
template <auto Field>
void SetField(WorkerOptions& options, py::handle value, const std::string& name) {
  using T = std::remove_cvref_t<decltype(options.*Field)>;
  if constexpr (std::is_same_v<T, bool>) {
    options.*Field = BoolArg(value, name);
  } else if constexpr (std::is_integral_v<T>) {
    options.*Field = IntArg<T>(value, name);
  } else if constexpr (std::is_same_v<T, float>) {
    options.*Field = FloatArg(value, name);
  } else {
    static_assert(std::is_same_v<T, std::string>);
    options.*Field = StringArg(value, name);
  }
}

struct AdvancedOption {
  const char* name;
  void (*set)(WorkerOptions& options, py::handle value, const std::string& name);
};

// Sorted by name. The coordinator, codec, bits, name and the transport's
// usual settings are named arguments of their own.
constexpr AdvancedOption kAdvancedOptions[] = {
    {"beta", &SetField<&WorkerOptions::beta>},
    {"block_size", &SetField<&WorkerOptions::block_size>},
    {"error_bits", &SetField<&WorkerOptions::error_bits>},
    {"gradient_device", &SetField<&WorkerOptions::gradient_device>},
    {"initial_backoff_ms", &SetField<&WorkerOptions::initial_backoff_ms>},
    {"coordinator_outage_ms", &SetField<&WorkerOptions::coordinator_outage_ms>},
    {"join_timeout_ms", &SetField<&WorkerOptions::join_timeout_ms>},
    {"max_backoff_ms", &SetField<&WorkerOptions::max_backoff_ms>},
    {"max_message_bytes", &SetField<&WorkerOptions::max_message_bytes>},
    {"max_retries", &SetField<&WorkerOptions::max_retries>},
    {"ordered_pushes", &SetField<&WorkerOptions::ordered_pushes>},
    {"pull_parts", &SetField<&WorkerOptions::pull_parts>},
    {"pull_wait_ms", &SetField<&WorkerOptions::pull_wait_ms>},
    {"push_chunk_bytes", &SetField<&WorkerOptions::push_chunk_bytes>},
    {"push_parts", &SetField<&WorkerOptions::push_parts>},
    {"reset_period", &SetField<&WorkerOptions::reset_period>},
    {"retry_budget_ms", &SetField<&WorkerOptions::retry_budget_ms>},
    {"rpc_timeout_ms", &SetField<&WorkerOptions::rpc_timeout_ms>},
    {"seed", &SetField<&WorkerOptions::seed>},
    {"step_timeout_ms", &SetField<&WorkerOptions::step_timeout_ms>},
    {"stochastic_rounding", &SetField<&WorkerOptions::stochastic_rounding>},
    {"tls_cert",
     [](WorkerOptions& options, py::handle value, const std::string& name) {
       options.security.tls_cert = StringArg(value, name);
     }},
    {"tls_key",
     [](WorkerOptions& options, py::handle value, const std::string& name) {
       options.security.tls_key = StringArg(value, name);
     }},
    {"tls_server_name",
     [](WorkerOptions& options, py::handle value, const std::string& name) {
       options.security.tls_server_name = StringArg(value, name);
     }},
};

}  // namespace

std::optional<MetricsEndpointOptions> MetricsArgs(py::handle port, const std::string& host) {
  if (port.is_none()) return std::nullopt;
  const int64_t value = IntArg<int64_t>(port, "metrics_port");
  if (value < 0 || value > 65535) {
    throw py::value_error("Worker(): metrics_port=" + std::to_string(value) +
                          " is not a port: expected 1 to 65535, 0 for any free port, or None "
                          "for no /metrics endpoint");
  }
  if (Status checked = CheckHost(host); !checked.ok()) {
    throw py::value_error("Worker(): metrics_host='" + host + "': " + checked.message());
  }
  MetricsEndpointOptions options;
  options.enabled = true;
  options.host = host;
  options.port = static_cast<int>(value);
  return options;
}

WorkerOptions MakeWorkerOptions(const WorkerArgs& args, const py::kwargs& advanced) {
  WorkerOptions options;
  options.coordinator = args.coordinator;
  // A name Connect would refuse raises the same InvalidArgumentError here.
  StatusOr<PushCodec> codec = ParsePushCodec(args.codec);
  RaiseIfError(codec.status());
  options.codec = codec.value();
  options.bits = args.bits;
  options.name = OptionalStringArg(args.name, "name");
  options.security.insecure = args.insecure;
  options.security.auth_token_file = OptionalStringArg(args.auth_token_file, "auth_token_file");
  options.security.tls_ca = OptionalStringArg(args.tls_ca, "tls_ca");
  for (const auto& [key, value] : advanced) {
    const auto name = py::str(key).cast<std::string>();
    const AdvancedOption* found = nullptr;
    for (const AdvancedOption& option : kAdvancedOptions) {
      if (name == option.name) found = &option;
    }
    if (found == nullptr) {
      throw py::type_error("Worker() got an unexpected keyword argument '" + name +
                           "' (the advanced options are the WorkerOptions fields: " +
                           py::str(py::cast(AdvancedOptionNames())).cast<std::string>() + ")");
    }
    found->set(options, value, name);
  }
  return options;
}

std::string WithKeywordNames(const std::string& message) {
  // Longest first, so that a list of flags reads as a list of keywords
  // (--tls-client-auth is a server flag, which a Worker has no keyword for).
  static const std::pair<std::string_view, std::string_view> kSpellings[] = {
      {"--tls-cert/--tls-key/--tls-ca/--tls-client-auth/--tls-server-name",
       "tls_cert, tls_key, tls_ca, tls_server_name"},
      {"--tls-cert/--tls-key", "tls_cert and tls_key"},
      {"--tls-server-name", "tls_server_name"},
      {"--auth-token-file", "auth_token_file"},
      {"--tls-cert", "tls_cert"},
      {"--tls-key", "tls_key"},
      {"--tls-ca", "tls_ca"},
      {"--insecure", "insecure=True"},
      {"--metrics-port", "metrics_port"},
  };
  std::string out = message;
  for (const auto& [flag, keyword] : kSpellings) {
    for (size_t at = out.find(flag); at != std::string::npos;
         at = out.find(flag, at + keyword.size())) {
      out.replace(at, flag.size(), keyword);
    }
  }
  return out;
}

std::vector<std::string> AdvancedOptionNames() {
  std::vector<std::string> names;
  for (const AdvancedOption& option : kAdvancedOptions) names.emplace_back(option.name);
  return names;
}

}  // namespace loco::python

// Checks of settings several binaries share that no single flag's range can
// make: ports that two listeners of one process would both ask for, and
// directories a flag names for the program to write in. Each runs once the
// flags are parsed and before anything starts, so that a bad setting is a
// usage error (exit 2) naming the flag, not a failure once ports are open.
// Messages name a flag as FlagSet::Named does: a value from the environment
// by its variable.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/flags.h"
#include "common/status.h"

namespace loco {

// Whether listeners on hosts `a` and `b` (as --host takes them) may bind the
// same address, so that one port cannot serve both: the same text (brackets
// and case aside), a wildcard ("0.0.0.0", "::") on either side, or
// "localhost" beside a loopback address. Other names are not resolved: two
// different names count as different addresses.
bool HostsMayOverlap(std::string_view a, std::string_view b);

// A port a process listens on, as its flags give it.
struct ListenerFlag {
  const char* port_flag;  // "metrics-port"
  const char* host_flag;  // "metrics-host": the flag of the host it binds
  std::string host;
  // 0 or less: no port of its own (off, or a free one the system picks:
  // --metrics-port -1), so never one another listener could ask for.
  int64_t port;
  // What a port of 0 means for this listener, for the advice: "no /metrics
  // endpoint".
  const char* zero_means;
};

// The listeners of a gRPC service process (loco-server, loco-coordinator),
// as their flags name them: --port and --health-port on --host, and
// --metrics-port on --metrics-host.
std::vector<ListenerFlag> ServiceListeners(const std::string& host, int64_t port,
                                           int64_t health_port, const std::string& metrics_host,
                                           int64_t metrics_port);

// InvalidArgument when two of `listeners` ask for the same port on hosts
// that may overlap (HostsMayOverlap), naming the later one's port flag,
// the earlier one's and both hosts: the first such pair in order.
[[nodiscard]] Status CheckListenerPorts(const FlagSet& flags,
                                        const std::vector<ListenerFlag>& listeners);

// What a program does with the directory a flag names.
enum class DirectoryUse {
  kCreate,    // creates it and its missing parents when missing (--checkpoint-dir)
  kExisting,  // takes it as it is (--state-dir): it must exist
};

// InvalidArgument "invalid value 'PATH' for <named>: ..." saying what is
// wrong and what is expected when `path` cannot serve: it exists but is not
// a directory (a regular file); it is missing (kExisting); it is missing
// and the nearest part of its path that exists is not a directory (kCreate:
// "ckpt.bin/run1"); or this process may not write in it (or, to create it,
// in that nearest existing directory). OK for an empty path (none given).
// Reads the file system, changes nothing.
[[nodiscard]] Status CheckDirectoryFlag(const std::string& named, const std::string& path,
                                        DirectoryUse use);

}  // namespace loco

#include "common/flag_checks.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

namespace loco {
namespace {

namespace fs = std::filesystem;

// `host` without brackets, in lower case.
std::string Normalized(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::string out(host);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool IsWildcard(const std::string& host) { return host == "0.0.0.0" || host == "::"; }

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// What a path that is not a directory names, in words, for a refusal.
std::string KindOf(const fs::file_status& status) {
  switch (status.type()) {
    case fs::file_type::regular:
      return "a regular file";
    case fs::file_type::character:
    case fs::file_type::block:
      return "a device";
    case fs::file_type::fifo:
      return "a pipe";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "not a directory";
  }
}

}  // namespace

bool HostsMayOverlap(std::string_view a, std::string_view b) {
  const std::string x = Normalized(a), y = Normalized(b);
  if (x == y || IsWildcard(x) || IsWildcard(y)) return true;
  return (x == "localhost" && IsLoopback(y)) || (y == "localhost" && IsLoopback(x));
}

Status CheckListenerPorts(const FlagSet& flags, const std::vector<ListenerFlag>& listeners) {
  for (size_t later = 1; later < listeners.size(); ++later) {
    const ListenerFlag& b = listeners[later];
    if (b.port <= 0) continue;
    for (size_t earlier = 0; earlier < later; ++earlier) {
      const ListenerFlag& a = listeners[earlier];
      if (a.port != b.port || !HostsMayOverlap(a.host, b.host)) continue;
      const std::string hosts = std::string(a.host_flag) == b.host_flag
                                    ? "both on " + flags.Named(a.host_flag) + " " + a.host
                                    : "on addresses that overlap (" + flags.Named(a.host_flag) +
                                          " " + a.host + ", " + flags.Named(b.host_flag) + " " +
                                          b.host + ")";
      const std::string expected = std::string("expected another port, or 0 for ") + b.zero_means;
      return InvalidArgument("invalid value '" + std::to_string(b.port) + "' for " +
                             flags.Named(b.port_flag) + ": " + flags.Named(a.port_flag) +
                             " asks for the same port, " + hosts +
                             ", and one port serves one listener; " + expected);
    }
  }
  return Status::Ok();
}

std::vector<ListenerFlag> ServiceListeners(const std::string& host, int64_t port,
                                           int64_t health_port, const std::string& metrics_host,
                                           int64_t metrics_port) {
  return {{"port", "host", host, port, "a free port the system picks"},
          {"health-port", "host", host, health_port, "no health port"},
          {"metrics-port", "metrics-host", metrics_host, metrics_port, "no /metrics endpoint"}};
}

Status CheckDirectoryFlag(const std::string& named, const std::string& path, DirectoryUse use) {
  if (path.empty()) return Status::Ok();
  const std::string refused = "invalid value '" + path + "' for " + named + ": ";
  const std::string expected = use == DirectoryUse::kCreate
                                   ? "expected an existing directory, or a new one below an "
                                     "existing directory"
                                   : "expected an existing directory";
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // through symbolic links
  if (fs::exists(status)) {
    if (!fs::is_directory(status)) {
      return InvalidArgument(refused + "it is " + KindOf(status) + "; " + expected);
    }
    if (::access(path.c_str(), W_OK | X_OK) != 0) {
      return InvalidArgument(refused +
                             "this process may not write in that directory; expected "
                             "a directory it may write in");
    }
    return Status::Ok();
  }
  if (use == DirectoryUse::kExisting) {
    return InvalidArgument(refused + "there is no such directory, and it is not created; " +
                           expected + " (create it first)");
  }
  // It is created with its missing parents (fs::create_directories), so
  // what must hold is the nearest ancestor that exists: a directory this
  // process may write in. "a/b/" names b: its parent is a.
  fs::path normal = fs::path(path).lexically_normal();
  if (!normal.has_filename()) normal = normal.parent_path();
  fs::path ancestor = normal;
  fs::file_status ancestor_status;
  do {
    ancestor = ancestor.has_parent_path() ? ancestor.parent_path() : fs::path(".");
    ancestor_status = fs::status(ancestor, ec);
  } while (!fs::exists(ancestor_status) && ancestor != ancestor.parent_path() &&
           ancestor != fs::path("."));
  if (!fs::exists(ancestor_status)) {
    return InvalidArgument(refused + "no part of it exists; " + expected);
  }
  if (!fs::is_directory(ancestor_status)) {
    return InvalidArgument(refused + "it does not exist, and '" + ancestor.string() +
                           "' on its path is " + KindOf(ancestor_status) + "; " + expected);
  }
  if (::access(ancestor.c_str(), W_OK | X_OK) != 0) {
    return InvalidArgument(refused + "it does not exist, and this process may not create it in '" +
                           ancestor.string() +
                           "'; expected a directory it may write in, or a new "
                           "one below such a directory");
  }
  return Status::Ok();
}

}  // namespace loco

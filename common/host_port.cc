#include "common/host_port.h"

#include <string>

namespace loco {
namespace {

constexpr char kExample[] = "e.g. 127.0.0.1:7000, or [::1]:7000 for an IPv6 host";

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// The text of an IPv6 address, with an optional zone ("fe80::1%eth0"): hex
// digits, ':' (at least one) and '.' (an embedded IPv4 address), then the
// zone's characters after '%'. The syntax only: the resolver reads the
// numbers.
bool IsIpv6Text(std::string_view text) {
  const size_t zone = text.find('%');
  const std::string_view address = text.substr(0, zone);
  if (address.find(':') == std::string_view::npos) return false;
  for (char c : address) {
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex && c != ':' && c != '.') return false;
  }
  if (zone == std::string_view::npos) return true;
  const std::string_view name = text.substr(zone + 1);
  if (name.empty()) return false;
  for (char c : name) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// A host name or IPv4 address: labels of letters, digits, '-' and '_'
// (container and Compose service names use '_'), separated by single dots;
// a trailing dot (a fully qualified name) is allowed.
bool IsHostName(std::string_view host) {
  if (host.size() > 254 || (host.size() == 254 && host.back() != '.')) return false;
  size_t label = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    const char c = host[i];
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
      continue;
    }
    if (!IsAlnum(c) && c != '-' && c != '_') return false;
    ++label;
  }
  return true;
}

}  // namespace

Status CheckHost(std::string_view host) {
  if (host.empty()) {
    return InvalidArgument(
        "the host is empty; expected a host name or an IP address, e.g. 127.0.0.1, 0.0.0.0 or ::");
  }
  const bool bracketed = host.front() == '[';
  if (bracketed
          ? host.size() > 2 && host.back() == ']' && IsIpv6Text(host.substr(1, host.size() - 2))
          : IsHostName(host) || IsIpv6Text(host)) {
    return Status::Ok();
  }
  return InvalidArgument("'" + std::string(host) +
                         "' is not a host name or an IP address; expected letters, digits, "
                         "'-' and '_' in labels separated by dots (e.g. 127.0.0.1 or "
                         "coordinator.example), or an IPv6 address (e.g. ::1)");
}

Status CheckHostPort(std::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return InvalidArgument("expected host:port (" + std::string(kExample) + "); there is no port");
  }
  const std::string_view host = address.substr(0, colon);
  const std::string_view port = address.substr(colon + 1);
  if (host.empty()) {
    return InvalidArgument("the host is empty; expected host:port (" + std::string(kExample) + ")");
  }
  // A bare IPv6 host would make the port ambiguous ("::1:7000"); gRPC
  // takes such a text for a host without a port.
  if (host.front() != '[' && host.find(':') != std::string_view::npos) {
    return InvalidArgument("the host '" + std::string(host) +
                           "' holds a ':'; expected host:port with an IPv6 host in brackets, "
                           "e.g. [::1]:7000");
  }
  if (Status h = CheckHost(host); !h.ok()) {
    return InvalidArgument(h.message() + "; expected host:port (" + kExample + ")");
  }
  // Digits only and at most 5 of them, so that the value cannot overflow.
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos) {
    return InvalidArgument("the port '" + std::string(port) +
                           "' is not a number in [1, 65535]; expected host:port (" + kExample +
                           ")");
  }
  const int number = std::stoi(std::string(port));
  if (number < 1 || number > 65535) {
    return InvalidArgument("the port " + std::to_string(number) +
                           " is outside [1, 65535]; expected host:port (" + kExample + ")");
  }
  return Status::Ok();
}

std::string JoinHostPort(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace loco

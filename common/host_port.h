// Host names and "host:port" addresses, checked where they are given (a
// flag, an option, a registration) rather than where they fail: gRPC turns
// a port above 65535 into another port (99999 dials 34463) and retries an
// address without a port until a deadline, and a listener on a host that
// does not resolve fails only once its program has started.
//
// The messages say what is wrong and what would be right, but not where
// the text came from: the caller adds that ("invalid value 'x' for
// --coordinator: ...").
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace loco {

// A host to listen on or dial: a host name or IPv4 address (letters,
// digits, '-' and '_' in labels separated by dots, at most 253 characters),
// or an IPv6 address, bare ("::1") or in brackets ("[::1]"). OK or
// InvalidArgument.
[[nodiscard]] Status CheckHost(std::string_view host);

// "host:port" as a client dials it: a host as CheckHost takes it (an IPv6
// host in brackets, "[::1]:7000", so that the port is the text after the
// last ':'), then a port of decimal digits in [1, 65535]. OK or
// InvalidArgument.
[[nodiscard]] Status CheckHostPort(std::string_view address);

// "host:port", with brackets around an IPv6 literal ("[::1]:7000"); a host
// already in brackets is kept as it is.
std::string JoinHostPort(const std::string& host, int port);

}  // namespace loco

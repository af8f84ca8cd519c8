// HttpGet: a minimal HTTP/1.0 GET over a raw TCP socket, for scraping
// /metrics in tests without another dependency. Bounded: every socket
// operation times out after `timeout`.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"

namespace loco::test {

// Returns the body of a 200 response; Unavailable for connection failures,
// Internal for any other status line.
StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path,
                              std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace loco::test

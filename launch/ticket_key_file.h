// A worker-ticket key file for a local run: loco-launch hands it to the
// coordinator (--ticket-key-file) when the plan restarts the coordinator, so
// that the tickets the workers got from Join stay valid across the restart
// (a coordinator without the flag draws a new random key per process).
#pragma once

#include <string>

#include "common/status.h"

namespace loco {

// Writes 32 random bytes (from /dev/urandom) to `path` as 64 hex digits,
// replacing any file there, readable and writable by the owner only (0600).
// Hex, not the raw bytes: the coordinator drops trailing CR/LF bytes from the
// file, which would shorten a raw key that happens to end in one.
[[nodiscard]] Status WriteRandomTicketKey(const std::string& path);

}  // namespace loco

// Worker-ticket key files: the key the coordinator signs worker tickets with
// (--ticket-key-file), kept in a file so that the tickets workers got from
// Join stay valid across a coordinator restart (a coordinator without one
// draws a random key per process). loco-coordinator with --state-dir and no
// --ticket-key-file creates one in its state directory on its first start
// and reads it on every later one (loco-launch gives it one when its plan
// restarts the coordinator).
//
// A key is 32 random bytes (from /dev/urandom) written as 64 hex digits,
// readable and writable by the owner only (0600). Hex, not the raw bytes:
// the coordinator drops trailing CR/LF bytes from the file, which would
// shorten a raw key that happens to end in one.
#pragma once

#include <string>

#include "common/status.h"

namespace loco {

// Writes a new key to `path` unless something is there already: true when
// it wrote one, false when it left what is there alone (the coordinator
// checks it when it reads it). The file appears whole or not at all: it is
// written under another name in the same directory and linked into place,
// so a start killed halfway leaves no short key behind. Two processes
// racing on one path end with one key, which both use.
[[nodiscard]] StatusOr<bool> WriteTicketKeyIfMissing(const std::string& path);

}  // namespace loco

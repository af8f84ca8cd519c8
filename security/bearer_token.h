// Bearer tokens: reading one from a file (a mounted Kubernetes Secret) and
// comparing two without leaking where they differ.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace loco {

// Reads the token in `path`. Trailing newlines (and carriage returns) are
// trimmed; the rest must be 1..4096 visible ASCII characters (0x21..0x7e),
// which is what an HTTP/2 header value may carry without escaping. An empty
// file is an error that names the file.
StatusOr<std::string> ReadBearerToken(const std::string& path);

// Equality in time that depends only on the lengths, not on where the first
// difference is (the expected token's content must not leak by timing).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace loco

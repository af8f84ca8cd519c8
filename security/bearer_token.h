// Bearer tokens: reading one from a file (a mounted Kubernetes Secret),
// the 'authorization' header value that carries one, and comparing two
// without leaking where they differ.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace loco {

// Reads the token in `path`. Trailing newlines (and carriage returns) are
// trimmed; the rest must be 1..4096 visible ASCII characters (0x21..0x7e),
// which is what an HTTP/2 header value may carry without escaping. An empty
// file is an error that names the file.
StatusOr<std::string> ReadBearerToken(const std::string& path);

// The 'authorization' metadata value that carries `token`: "Bearer <token>".
std::string BearerHeaderValue(std::string_view token);

// The token that an 'authorization' value carries: what follows "Bearer ",
// when that is not empty; nullopt for any other value. The view points into
// `header_value`.
std::optional<std::string_view> TokenOfBearerHeader(std::string_view header_value);

// Equality in time that depends only on the lengths, not on where the first
// difference is (the expected token's content must not leak by timing).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace loco

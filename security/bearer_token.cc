#include "security/bearer_token.h"

#include <fstream>
#include <iterator>

namespace loco {

namespace {
constexpr size_t kMaxTokenBytes = 4096;
constexpr std::string_view kBearerPrefix = "Bearer ";
}  // namespace

std::string BearerHeaderValue(std::string_view token) {
  return std::string(kBearerPrefix) + std::string(token);
}

std::optional<std::string_view> TokenOfBearerHeader(std::string_view header_value) {
  if (header_value.size() <= kBearerPrefix.size() || !header_value.starts_with(kBearerPrefix)) {
    return std::nullopt;
  }
  return header_value.substr(kBearerPrefix.size());
}

StatusOr<std::string> ReadBearerToken(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgument("--auth-token-file '" + path + "' cannot be opened for reading");
  }
  std::string token;
  // One byte past the limit, to tell "too long" from "exactly the limit".
  char c;
  while (token.size() <= kMaxTokenBytes + 2 && in.get(c)) token.push_back(c);
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty()) {
    return InvalidArgument("--auth-token-file '" + path +
                           "' is empty; expected the bearer token (one line)");
  }
  if (token.size() > kMaxTokenBytes) {
    return InvalidArgument("--auth-token-file '" + path + "' holds more than " +
                           std::to_string(kMaxTokenBytes) + " bytes; expected one token line");
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char u = static_cast<unsigned char>(token[i]);
    if (u < 0x21 || u > 0x7e) {
      return InvalidArgument("--auth-token-file '" + path + "' has a byte 0x" +
                             std::string(1, "0123456789abcdef"[u >> 4]) +
                             std::string(1, "0123456789abcdef"[u & 15]) + " at offset " +
                             std::to_string(i) +
                             "; a token is visible ASCII without spaces, on one line");
    }
  }
  return token;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Walk the longer length so that the time depends on the lengths only.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

}  // namespace loco

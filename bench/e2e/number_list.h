// ParseNumberList: the comma-separated integer lists that the e2e
// benchmarks' flags take ("--hidden 3072,3072", "--rows 8,16,32").
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace loco::bench {

// "8,16,32" -> {8, 16, 32}; empty unless every item is a decimal integer
// in [low, high] (an empty item, "8,,16", is refused too).
inline std::vector<long> ParseNumberList(const std::string& s, long low, long high) {
  std::vector<long> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    const std::string item = s.substr(pos, comma - pos);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < low || v > high) return {};
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

// The same list as layer sizes, each in [1, 2^24].
inline std::vector<size_t> ParseLayerSizes(const std::string& s) {
  const std::vector<long> sizes = ParseNumberList(s, 1, long{1} << 24);
  return std::vector<size_t>(sizes.begin(), sizes.end());
}

}  // namespace loco::bench

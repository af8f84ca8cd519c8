// Bit-for-bit comparison of floats, for the tests that hold a fast path to
// its reference exactly: -0.0 differs from 0.0, and a NaN equals only the
// same NaN bits.
#pragma once

#include <cstring>
#include <vector>

namespace loco {

inline bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace loco

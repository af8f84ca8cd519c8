#include "common/format_double.h"

#include <charconv>

namespace loco {

std::string FormatDouble(double value) {
  // Shortest round trip: as exact as printf's %.17g, without its trailing
  // noise ("9.9999999999999995e-08" for 1e-7) in logs and command lines.
  char buf[64];
  const std::to_chars_result written = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, written.ptr);
}

std::string FormatFloat(float value) {
  char buf[64];
  const std::to_chars_result written = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, written.ptr);
}

}  // namespace loco

#include "server/coordinator/incarnation.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace loco {
namespace {

// 2026-01-01T00:00:00Z.
constexpr int64_t kEpochUnixSeconds = 1767225600;

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

uint64_t ClockIncarnation(std::chrono::system_clock::time_point now) {
  const int64_t tenths =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() /
          100 -
      kEpochUnixSeconds * 10;
  return static_cast<uint64_t>(std::max<int64_t>(1, tenths));
}

StatusOr<uint64_t> NextIncarnation(const std::string& state_dir,
                                   std::chrono::system_clock::time_point now) {
  const uint64_t from_clock = ClockIncarnation(now);
  if (state_dir.empty()) return from_clock;
  const std::string path = state_dir + "/incarnation";
  uint64_t stored = 0;
  std::ifstream in(path);
  if (in) {
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream parse(text);
    if (!(parse >> stored) || stored == 0) {
      return FailedPrecondition(path + " holds '" + text.substr(0, 40) + "', not an incarnation "
                                "number; fix or remove it (removing it falls back to the clock)");
    }
  }
  const uint64_t next = std::max(stored + 1, from_clock);
  const std::string temporary = path + ".tmp";
  std::FILE* out = std::fopen(temporary.c_str(), "w");
  if (out == nullptr) {
    return FailedPrecondition("cannot write " + temporary + " (--state-dir): " + ErrnoText());
  }
  const bool written = std::fprintf(out, "%llu\n", static_cast<unsigned long long>(next)) > 0;
  const bool closed = std::fclose(out) == 0;
  if (!written || !closed || std::rename(temporary.c_str(), path.c_str()) != 0) {
    return FailedPrecondition("cannot store the incarnation in " + path + ": " + ErrnoText());
  }
  return next;
}

}  // namespace loco

#include "common/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace loco {
namespace {
std::mutex g_tag_mu;
std::string& Tag() {
  static std::string tag = "loco";
  return tag;
}
}  // namespace

void SetLogTag(const std::string& tag) {
  std::lock_guard<std::mutex> l(g_tag_mu);
  Tag() = tag;
}

void LogLine(LogLevel level, const std::string& message) {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[32];
  std::strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
  const char* lv = level == LogLevel::kInfo ? "I" : level == LogLevel::kWarning ? "W" : "E";
  std::string tag;
  {
    std::lock_guard<std::mutex> l(g_tag_mu);
    tag = Tag();
  }
  char head[96];
  std::snprintf(head, sizeof(head), "%s %s.%03d %s] ", lv, ts, ms, tag.c_str());
  std::string line = head + message + "\n";
  // One write(2) per line keeps lines from different threads whole.
  ssize_t r = ::write(2, line.data(), line.size());
  (void)r;
}

}  // namespace loco

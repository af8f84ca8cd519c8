// Minimal leveled logging to stderr, one line per call, with a wall-clock
// timestamp and the process's role tag. Thread-safe (one write per line).
#pragma once

#include <sstream>
#include <string>

namespace loco {

enum class LogLevel { kInfo, kWarning, kError };

// Sets the tag printed on every line ("server-0", "worker-3", ...). Call once
// at startup from main; library code never calls it.
void SetLogTag(const std::string& tag);
void LogLine(LogLevel level, const std::string& message);

}  // namespace loco

#define LOCO_LOG(level, expr)                         \
  do {                                                \
    std::ostringstream loco_log_os_;                  \
    loco_log_os_ << expr;                             \
    ::loco::LogLine(::loco::LogLevel::level, loco_log_os_.str()); \
  } while (0)
#define LOG_INFO(expr) LOCO_LOG(kInfo, expr)
#define LOG_WARN(expr) LOCO_LOG(kWarning, expr)
#define LOG_ERROR(expr) LOCO_LOG(kError, expr)

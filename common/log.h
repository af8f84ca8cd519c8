// Minimal leveled logging, one line per call, with a wall-clock timestamp
// and the process's role tag. Every line goes to the process's log sink:
// by default one write(2) of the formatted line to fd 2 (stderr), so that
// lines from different threads stay whole. An embedding process (the
// Python module loco_ps._core) may install a sink of its own.
//
// The sink, like fd 2 and the tag, belongs to the whole process: there is
// one per process, set by whoever owns main() or the embedding runtime,
// never by library code. A child of fork() starts with the parent's sink
// and may log and replace it at once (the lock behind them is never
// inherited held).
#pragma once

#include <chrono>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>

namespace loco {

enum class LogLevel { kInfo, kWarning, kError };

// One line as LogLine received it. The views are valid only during the
// sink's call; a sink that keeps the line copies them.
struct LogRecord {
  LogLevel level = LogLevel::kInfo;
  std::chrono::system_clock::time_point time;  // when LogLine was called
  std::string_view tag;                        // SetLogTag's, "loco" by default
  std::string_view message;                    // without a trailing newline
};

// Where the lines go. The contract for a sink:
//  * It runs on the thread that logs, which may be any thread of the
//    library (gRPC's, a heartbeat's, a caller's) and may hold any of the
//    library's locks; several threads may run it at once. So it must be
//    thread-safe, return promptly, and never wait for anything a logging
//    thread may hold or wait for itself: no lock of the caller's code that
//    is held around calls into the library, no interpreter lock (a Python
//    thread may hold the GIL while it waits for the library, which may be
//    logging: taking the GIL here would deadlock). Queue the line instead.
//  * It must not throw, and must not log (no LogLine: it would recurse).
//  * A sink replaced by SetLogSink may still be running on other threads
//    for lines that started before; it is destroyed only after the last of
//    them returns, so whatever it uses must be owned by it (captured by
//    value or shared_ptr), not borrowed.
using LogSink = std::function<void(const LogRecord&)>;

// Sets the tag printed on every line ("server-0", "worker-3", ...). Call once
// at startup from main; library code never calls it.
void SetLogTag(const std::string& tag);

// Sends every later line to `sink`; an empty one restores the default
// (WriteLogRecordToStderr). Thread-safe: lines logged meanwhile go whole to
// the old sink or the new one.
void SetLogSink(LogSink sink);

// "W 12:34:56.789 tag] message": the level's letter (I, W, E), the UTC time
// to the millisecond, the tag and the message, without a newline.
std::string FormatLogRecord(const LogRecord& record);

// The default sink: FormatLogRecord plus a newline, in one write(2) to fd 2.
void WriteLogRecordToStderr(const LogRecord& record);

// Stamps `message` with the time and the tag and hands it to the sink.
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

#include "common/log.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <utility>

namespace loco {
namespace {

// The process's tag and sink. Never destroyed: threads that outlive main
// (gRPC's, detached ones) may still log during static destruction.
struct LogState {
  std::mutex mu;
  std::string tag = "loco";
  // Null: WriteLogRecordToStderr. Shared so that a line in flight keeps the
  // sink it started with alive while SetLogSink replaces it.
  std::shared_ptr<const LogSink> sink;
};

LogState& State();

// fork() copies the mutex as it is: held by a thread that does not exist
// in the child, it would never be released there, and the child's first
// line (or SetLogSink: the Python package installs a fresh sink in a
// forked child) would wait forever. So fork waits for the mutex and both
// sides release it.
void LockForFork() { State().mu.lock(); }
void UnlockAfterFork() { State().mu.unlock(); }

LogState& State() {
  static LogState* const state = [] {
    auto* made = new LogState;
    pthread_atfork(&LockForFork, &UnlockAfterFork, &UnlockAfterFork);
    return made;
  }();
  return *state;
}

}  // namespace

void SetLogTag(const std::string& tag) {
  LogState& state = State();
  std::lock_guard<std::mutex> l(state.mu);
  state.tag = tag;
}

void SetLogSink(LogSink sink) {
  std::shared_ptr<const LogSink> next;
  if (sink) next = std::make_shared<const LogSink>(std::move(sink));
  LogState& state = State();
  {
    std::lock_guard<std::mutex> l(state.mu);
    state.sink.swap(next);
  }
  // `next` now holds the old sink: released here, outside the lock (its
  // destructor may be arbitrary code), or by the last line still in it.
}

std::string FormatLogRecord(const LogRecord& record) {
  const std::time_t t = std::chrono::system_clock::to_time_t(record.time);
  const auto since_epoch =
      std::chrono::duration_cast<std::chrono::milliseconds>(record.time.time_since_epoch());
  const int ms = static_cast<int>(since_epoch.count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[32];
  std::strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
  const char* lv = record.level == LogLevel::kInfo      ? "I"
                   : record.level == LogLevel::kWarning ? "W"
                                                        : "E";
  char head[64];
  std::snprintf(head, sizeof(head), "%s %s.%03d ", lv, ts, ms);
  std::string line = head;
  line.append(record.tag);
  line += "] ";
  line.append(record.message);
  return line;
}

void WriteLogRecordToStderr(const LogRecord& record) {
  const std::string line = FormatLogRecord(record) + "\n";
  // One write(2) per line keeps lines from different threads whole.
  ssize_t r = ::write(2, line.data(), line.size());
  (void)r;
}

void LogLine(LogLevel level, const std::string& message) {
  const auto now = std::chrono::system_clock::now();
  std::string tag;
  std::shared_ptr<const LogSink> sink;
  {
    LogState& state = State();
    std::lock_guard<std::mutex> l(state.mu);
    tag = state.tag;
    sink = state.sink;
  }
  const LogRecord record{level, now, tag, message};
  // Outside the lock: a sink may take locks of its own, and SetLogSink must
  // not wait for a slow one.
  if (sink) {
    (*sink)(record);
  } else {
    WriteLogRecordToStderr(record);
  }
}

}  // namespace loco

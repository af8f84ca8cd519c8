// LogQueue: the C++ library's log lines (common/log.h) on their way to
// Python's logging. The sink that python/src/log_relay.cc installs pushes
// each line here on the thread that logs; a Python thread takes them and
// hands them to logging.getLogger("loco_ps") (loco_ps/_native_log.py).
//
// Why a queue: a line may be logged on any thread (gRPC's, the heartbeat's,
// a call's), holding any of the library's locks, while a Python thread
// holds the GIL and waits for that same library. Taking the GIL to log
// there could deadlock, so Push never touches Python: it copies the line
// under a mutex that is only ever held for a few instructions.
//
// Bounded: when `capacity` lines wait, the oldest is dropped and counted,
// and the next Take reports the count (a Python thread held the GIL so long
// that the deliverer could not run; the newest lines say most).
//
// Thread safety: every method may be called from any thread; none takes
// the GIL. Wait blocks, so call it with the GIL released.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "common/log.h"

namespace loco::python {

class LogQueue {
 public:
  struct Line {
    LogLevel level = LogLevel::kInfo;
    double time_s = 0;  // seconds since the Unix epoch, as Python's time.time()
    std::string message;
  };
  struct Batch {
    std::vector<Line> lines;  // oldest first
    uint64_t dropped = 0;     // lines dropped since the previous Take, older than `lines`
  };

  explicit LogQueue(size_t capacity) : capacity_(capacity) {}

  // The sink's work: copies the line in, dropping the oldest when full.
  // Once closed, writes it to fd 2 instead (WriteLogRecordToStderr), as
  // the default sink would: a line that reached this sink just as it was
  // replaced is not lost.
  void Push(const LogRecord& record);
  // Blocks until a line waits or the queue is closed; true when lines wait
  // and the queue is open, false once it is closed (Take still returns
  // what it holds).
  bool Wait();
  // Every waiting line and the count dropped before them; empties the queue.
  Batch Take();
  // Wakes every Wait; later Pushes go to fd 2.
  void Close();
  bool closed() const;

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Line> lines_;  // under mu_
  uint64_t dropped_ = 0;    // under mu_
  bool closed_ = false;     // under mu_
};

}  // namespace loco::python

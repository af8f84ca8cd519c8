#include "log_queue.h"

#include <chrono>
#include <utility>

namespace loco::python {

void LogQueue::Push(const LogRecord& record) {
  // Copied before the lock, so that the lock is held only to link it in.
  Line line;
  line.level = record.level;
  line.time_s = std::chrono::duration<double>(record.time.time_since_epoch()).count();
  line.message.assign(record.message);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!closed_) {
      if (lines_.size() >= capacity_) {
        lines_.pop_front();
        ++dropped_;
      }
      lines_.push_back(std::move(line));
      changed_.notify_one();
      return;
    }
  }
  WriteLogRecordToStderr(record);
}

bool LogQueue::Wait() {
  std::unique_lock<std::mutex> l(mu_);
  changed_.wait(l, [this] { return closed_ || !lines_.empty(); });
  return !closed_;
}

LogQueue::Batch LogQueue::Take() {
  Batch batch;
  std::deque<Line> taken;
  {
    std::lock_guard<std::mutex> l(mu_);
    taken.swap(lines_);
    batch.dropped = dropped_;
    dropped_ = 0;
  }
  batch.lines.assign(std::make_move_iterator(taken.begin()), std::make_move_iterator(taken.end()));
  return batch;
}

void LogQueue::Close() {
  {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
  }
  changed_.notify_all();
}

bool LogQueue::closed() const {
  std::lock_guard<std::mutex> l(mu_);
  return closed_;
}

}  // namespace loco::python

#include "server/payload_buffers.h"

#include <utility>

namespace loco {

std::string PayloadBuffers::Take(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t best = spares_.size();
  for (size_t i = 0; i < spares_.size(); ++i) {
    const std::string& s = spares_[i];
    if (s.capacity() < bytes) continue;
    if (s.size() == bytes) {
      best = i;
      break;
    }
    if (best == spares_.size() || s.capacity() < spares_[best].capacity()) best = i;
  }
  if (best == spares_.size()) return std::string();
  std::string taken = std::move(spares_[best]);
  spares_[best] = std::move(spares_.back());
  spares_.pop_back();
  return taken;
}

void PayloadBuffers::Recycle(std::vector<std::string> buffers) {
  std::vector<std::string> kept;
  kept.reserve(buffers.size());
  for (std::string& b : buffers) {
    if (!b.empty()) kept.push_back(std::move(b));
  }
  std::vector<std::string> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    limit_ = kept.size();
    old = std::exchange(spares_, std::move(kept));
  }
  // `old` is freed here, outside the lock.
}

void PayloadBuffers::Give(std::string buffer) {
  if (buffer.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (spares_.size() < limit_) spares_.push_back(std::move(buffer));
}

size_t PayloadBuffers::spares() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spares_.size();
}

size_t PayloadBuffers::spare_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t total = 0;
  for (const std::string& s : spares_) total += s.capacity();
  return total;
}

}  // namespace loco

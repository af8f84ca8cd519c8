#include "server/coordinator/join_rate_limit.h"

#include <algorithm>

namespace loco {

JoinRateLimit::JoinRateLimit(double joins_per_second, double burst, Clock clock)
    : rate_(joins_per_second), burst_(burst), clock_(std::move(clock)), available_(burst) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
  last_ = clock_();
}

void JoinRateLimit::Refill() {
  const auto now = clock_();
  if (now <= last_) return;
  const double seconds = std::chrono::duration<double>(now - last_).count();
  available_ = std::min(burst_, available_ + seconds * rate_);
  last_ = now;
}

bool JoinRateLimit::TryAcquire() {
  Refill();
  if (available_ < 1.0) return false;
  available_ -= 1.0;
  return true;
}

void JoinRateLimit::Refund() { available_ = std::min(burst_, available_ + 1.0); }

}  // namespace loco

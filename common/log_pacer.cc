#include "common/log_pacer.h"

namespace loco {

bool LogPacer::ShouldLog(std::chrono::steady_clock::time_point now) {
  ++seen_;
  if (seen_ <= every_logged_ || now - last_logged_ >= period_) {
    last_logged_ = now;
    unlogged_ = pending_;
    pending_ = 0;
    return true;
  }
  ++pending_;
  return false;
}

std::string LogPacer::SinceLastLine(const std::string& noun) const {
  if (unlogged_ == 0) return "";
  return " (" + std::to_string(unlogged_) + " " + noun + " since the last line)";
}

}  // namespace loco

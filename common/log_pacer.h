// LogPacer: which occurrences of a repeated event (a retry, a failed
// registration) get a log line. The first few each, then at most one per
// period, so that an outage of minutes reads as a line every few seconds
// with the count in between, not one line per attempt.
#pragma once

#include <chrono>
#include <string>

namespace loco {

class LogPacer {
 public:
  static constexpr int kDefaultEveryLogged = 3;
  static constexpr std::chrono::seconds kDefaultPeriod{10};

  // The first `every_logged` occurrences are logged each; after them at
  // most one per `period`.
  explicit LogPacer(int every_logged = kDefaultEveryLogged,
                    std::chrono::steady_clock::duration period = kDefaultPeriod)
      : every_logged_(every_logged), period_(period) {}

  // Counts one occurrence, at `now`; whether it gets a line.
  bool ShouldLog(std::chrono::steady_clock::time_point now);
  // After ShouldLog said yes: how many occurrences went without a line
  // between the previous line and this one (for this line to report).
  int unlogged() const { return unlogged_; }
  // That count as the end of the line: " (N <noun> since the last line)",
  // or "" when there were none.
  std::string SinceLastLine(const std::string& noun) const;

 private:
  int every_logged_;
  std::chrono::steady_clock::duration period_;
  int seen_ = 0;
  std::chrono::steady_clock::time_point last_logged_{};
  int unlogged_ = 0;
  int pending_ = 0;
};

}  // namespace loco

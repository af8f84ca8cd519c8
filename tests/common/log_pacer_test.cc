// LogPacer's schedule of log lines, on a synthetic clock.
#include "common/log_pacer.h"

#include <gtest/gtest.h>

namespace loco {
namespace {

using std::chrono::milliseconds;

TEST(LogPacer, LogsTheFirstOccurrencesThenOneLinePerPeriod) {
  LogPacer pacer;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  for (int i = 1; i <= LogPacer::kDefaultEveryLogged; ++i) {
    EXPECT_TRUE(pacer.ShouldLog(t0 + milliseconds(i * 100))) << i;
    EXPECT_EQ(pacer.unlogged(), 0);
    EXPECT_EQ(pacer.SinceLastLine("retries"), "");
  }
  const auto last_line = t0 + milliseconds(LogPacer::kDefaultEveryLogged * 100);
  for (int i = 1; i <= 5; ++i) EXPECT_FALSE(pacer.ShouldLog(last_line + milliseconds(1000 * i)));
  // A period after the last line: a line, which reports the 5 in between.
  EXPECT_TRUE(pacer.ShouldLog(last_line + LogPacer::kDefaultPeriod));
  EXPECT_EQ(pacer.unlogged(), 5);
  EXPECT_EQ(pacer.SinceLastLine("retries"), " (5 retries since the last line)");
  EXPECT_FALSE(pacer.ShouldLog(last_line + LogPacer::kDefaultPeriod + milliseconds(1)));
  EXPECT_TRUE(pacer.ShouldLog(last_line + 2 * LogPacer::kDefaultPeriod));
  EXPECT_EQ(pacer.unlogged(), 1);
}

TEST(LogPacer, TheCountAndPeriodAreTheCallers) {
  LogPacer pacer(/*every_logged=*/1, milliseconds(50));
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  EXPECT_TRUE(pacer.ShouldLog(t0));
  EXPECT_FALSE(pacer.ShouldLog(t0 + milliseconds(49)));
  EXPECT_TRUE(pacer.ShouldLog(t0 + milliseconds(50)));
  EXPECT_EQ(pacer.unlogged(), 1);
}

}  // namespace
}  // namespace loco

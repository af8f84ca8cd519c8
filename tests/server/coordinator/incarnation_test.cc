// server/coordinator/incarnation.h: the clock's number grows with time; a
// state directory keeps it growing by at least one per start even when the
// clock does not move (or steps back), and a damaged file is an error, not
// a silent reset.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include <stdlib.h>
#include <unistd.h>

#include "server/coordinator/incarnation.h"

namespace loco {
namespace {

using std::chrono::system_clock;

TEST(Incarnation, TheClocksGrowsByTenthsOfASecond) {
  const auto now = system_clock::now();
  const uint64_t a = ClockIncarnation(now);
  EXPECT_GE(a, 1u);
  EXPECT_EQ(ClockIncarnation(now + std::chrono::milliseconds(100)), a + 1);
  EXPECT_EQ(ClockIncarnation(now + std::chrono::seconds(60)), a + 600);
  EXPECT_EQ(ClockIncarnation(system_clock::time_point{}), 1u) << "before 2026: the floor";
}

TEST(Incarnation, AStateDirectoryKeepsItGrowingWhateverTheClock) {
  char dir[] = "/tmp/loco-state-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string state = dir;
  const auto now = system_clock::now();
  auto first = NextIncarnation(state, now);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, ClockIncarnation(now));
  auto second = NextIncarnation(state, now);  // the clock did not move
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, *first + 1);
  auto third = NextIncarnation(state, now - std::chrono::hours(1));  // it stepped back
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(*third, *second + 1);

  { std::ofstream(state + "/incarnation") << "garbage"; }
  auto damaged = NextIncarnation(state, now);
  EXPECT_EQ(damaged.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(damaged.status().message().find("not an incarnation number"), std::string::npos);
  std::remove((state + "/incarnation").c_str());
  EXPECT_EQ(NextIncarnation(state + "/missing", now).status().code(),
            StatusCode::kFailedPrecondition);
  rmdir(dir);
}

}  // namespace
}  // namespace loco

#include "launch/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace loco {
namespace {

std::string TempLog(const char* name) {
  return std::string(::testing::TempDir()) + "/" + name + "." + std::to_string(::getpid()) + ".log";
}

bool WaitExit(ChildProcess& c, int ms) {
  for (int i = 0; i < ms / 10; ++i) {
    if (c.Poll()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return c.Poll();
}

TEST(ChildProcess, ReadsStdoutLinesAndLogsStderr) {
  ChildProcess c("echo", {"/bin/sh", "-c", "echo LISTENING 127.0.0.1:5; echo oops >&2; exit 3"},
                 TempLog("echo"));
  ASSERT_TRUE(c.Start().ok());
  auto line = c.WaitLine(5000);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line, "LISTENING 127.0.0.1:5");
  ASSERT_TRUE(WaitExit(c, 5000));
  EXPECT_EQ(c.exit_code(), 3);
  EXPECT_EQ(c.DescribeExit(), "exit code 3");
  EXPECT_NE(c.LogTail(5).find("oops"), std::string::npos);
}

TEST(ChildProcess, StopEscalatesToKillForAChildIgnoringTerm) {
  ChildProcess c("stubborn", {"/bin/sh", "-c", "trap '' TERM; echo ready; sleep 30"},
                 TempLog("stubborn"));
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(c.WaitLine(5000).has_value());
  auto t0 = std::chrono::steady_clock::now();
  c.Stop(300);
  EXPECT_TRUE(c.exited());
  EXPECT_EQ(c.exit_code(), 128 + SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

TEST(ChildProcess, MissingBinaryIsAClearError) {
  ChildProcess c("ghost", {"/nonexistent/loco-server"}, TempLog("ghost"));
  Status s = c.Start();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/loco-server"), std::string::npos);
}

}  // namespace
}  // namespace loco

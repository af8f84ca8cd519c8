// CheckChildFlags against real child processes (/bin/sh scripts standing in
// for a program's --check-flags answer): the exit code decides, the reason
// is the program's last stderr line, and every wait is bounded.
#include "launch/child_flags_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tests/common/says.h"

namespace loco {
namespace {

std::string CheckLog(const char* name) {
  return std::string(::testing::TempDir()) + "/check-" + name + "." + std::to_string(::getpid()) +
         ".log";
}

// sh -c SCRIPT --check-flags: the appended flag becomes $0, so SCRIPT sees
// it as its name.
Status CheckScript(const char* name, const std::string& script, int timeout_ms = 10000) {
  return CheckChildFlags("the workers' flags", {"/bin/sh", "-c", script}, CheckLog(name),
                         timeout_ms);
}

TEST(CheckChildFlags, ExitZeroTakesTheFlags) {
  const Status s = CheckScript("ok", "test \"$0\" = --check-flags && echo valid");
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(CheckChildFlags, ExitTwoIsAUsageErrorWithTheProgramsLastLine) {
  const Status s =
      CheckScript("usage", "echo 'sh: warming up' >&2; echo 'sh: unknown flag --modle' >&2; "
                           "echo >&2; exit 2");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  // The program's own "sh: " prefix is not repeated after its name.
  EXPECT_TRUE(Says(s.message(), {"the workers' flags: sh refuses them: unknown flag --modle"}))
      << s.message();
  EXPECT_FALSE(Says(s.message(), {"warming up"})) << s.message();
}

TEST(CheckChildFlags, AnyOtherEndIsNotAUsageError) {
  Status s = CheckScript("crash", "exit 1");
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
  EXPECT_TRUE(Says(s.message(), {"ended with exit code 1"})) << s.message();
  s = CheckScript("killed", "kill -9 $$");
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
  EXPECT_TRUE(Says(s.message(), {"killed by signal 9"})) << s.message();
}

TEST(CheckChildFlags, AProgramThatDoesNotAnswerIsKilledAtTheTimeout) {
  const Status s = CheckScript("slow", "exec sleep 30", /*timeout_ms=*/300);
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
  EXPECT_TRUE(Says(s.message(), {"did not answer within 300 ms"})) << s.message();
}

TEST(CheckChildFlags, AMissingProgramIsAnError) {
  const Status s = CheckChildFlags("the servers' flags", {"/nonexistent/loco-server"},
                                   CheckLog("missing"), 10000);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

}  // namespace
}  // namespace loco

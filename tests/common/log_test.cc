// LogLine and its sink (common/log.h): the default writes the formatted
// line to fd 2; an installed sink receives every line whole, with its
// level, time, tag and message; replacing the sink neither waits for nor
// frees a sink that a line is still in; many threads may log meanwhile,
// and a forked child may log at once.
#include "common/log.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace loco {
namespace {

// What a test sink received, owned by the sink (a shared_ptr it captures).
struct Received {
  std::mutex mu;
  std::vector<LogLevel> levels;
  std::vector<std::string> messages;
  std::vector<std::string> tags;
  std::vector<std::chrono::system_clock::time_point> times;
};

LogSink Collect(std::shared_ptr<Received> into) {
  return [into](const LogRecord& record) {
    std::lock_guard<std::mutex> l(into->mu);
    into->levels.push_back(record.level);
    into->messages.emplace_back(record.message);
    into->tags.emplace_back(record.tag);
    into->times.push_back(record.time);
  };
}

// Every test leaves the process's sink as it found it: the default.
class LogSinkTest : public ::testing::Test {
 protected:
  void TearDown() override { SetLogSink(nullptr); }
};

TEST_F(LogSinkTest, ASinkReceivesEveryLineWithItsLevelTimeTagAndMessage) {
  auto received = std::make_shared<Received>();
  SetLogSink(Collect(received));
  const auto before = std::chrono::system_clock::now();
  LOG_INFO("joined as worker " << 3);
  LOG_WARN("a warning");
  LOG_ERROR("an error: " << 1.5);
  const auto after = std::chrono::system_clock::now();
  std::lock_guard<std::mutex> l(received->mu);
  EXPECT_EQ(received->levels,
            (std::vector<LogLevel>{LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}));
  EXPECT_EQ(received->messages,
            (std::vector<std::string>{"joined as worker 3", "a warning", "an error: 1.5"}));
  EXPECT_EQ(received->tags, (std::vector<std::string>(3, "loco")));
  for (const auto& time : received->times) {
    EXPECT_LE(before, time);
    EXPECT_LE(time, after);
  }
}

TEST_F(LogSinkTest, TheDefaultAndARestoredDefaultWriteOneFormattedLineToStderr) {
  testing::internal::CaptureStderr();
  LOG_WARN("to fd 2");
  std::string written = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(std::regex_match(written, std::regex(R"(W \d\d:\d\d:\d\d\.\d{3} loco\] to fd 2\n)")))
      << written;

  auto received = std::make_shared<Received>();
  SetLogSink(Collect(received));
  testing::internal::CaptureStderr();
  LOG_INFO("to the sink");
  SetLogSink(nullptr);
  LOG_ERROR("to fd 2 again");
  written = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(std::regex_match(written, std::regex(R"(E [0-9:.]{12} loco\] to fd 2 again\n)")))
      << written;
  std::lock_guard<std::mutex> l(received->mu);
  EXPECT_EQ(received->messages, (std::vector<std::string>{"to the sink"}));
}

TEST(LogFormatTest, LevelLetterUtcTimeToTheMillisecondTagAndMessage) {
  LogRecord record;
  record.level = LogLevel::kError;
  record.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(3723045));
  record.tag = "server-0";
  record.message = "boom";
  EXPECT_EQ(FormatLogRecord(record), "E 01:02:03.045 server-0] boom");
  record.level = LogLevel::kInfo;
  EXPECT_EQ(FormatLogRecord(record).substr(0, 2), "I ");
  record.level = LogLevel::kWarning;
  EXPECT_EQ(FormatLogRecord(record).substr(0, 2), "W ");
}

// A line inside the old sink when SetLogSink replaces it: SetLogSink does
// not wait for it, later lines go to the new sink, and the old sink (with
// what it owns) is released only once that line has left it.
TEST_F(LogSinkTest, AReplacedSinkFinishesItsLineAndIsReleasedAfterIt) {
  auto old_received = std::make_shared<Received>();
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  SetLogSink([old_received, &entered, released](const LogRecord& record) {
    entered.set_value();
    released.wait();
    std::lock_guard<std::mutex> l(old_received->mu);
    old_received->messages.emplace_back(record.message);
  });
  std::weak_ptr<Received> old_alive = old_received;
  old_received.reset();  // the sink owns it now
  std::thread logging([] { LOG_WARN("in the old sink"); });
  entered.get_future().wait();

  auto new_received = std::make_shared<Received>();
  SetLogSink(Collect(new_received));  // returns with the old sink still busy
  LOG_WARN("in the new sink");
  EXPECT_FALSE(old_alive.expired());
  release.set_value();
  logging.join();
  EXPECT_TRUE(old_alive.expired());  // released by the line that was in it
  std::lock_guard<std::mutex> l(new_received->mu);
  EXPECT_EQ(new_received->messages, (std::vector<std::string>{"in the new sink"}));
}

TEST_F(LogSinkTest, ThreadsLogWholeLinesWhileTheSinkIsReplaced) {
  constexpr int kThreads = 4;
  constexpr int kLines = 2000;
  auto counted = std::make_shared<std::atomic<int>>(0);
  auto malformed = std::make_shared<std::atomic<int>>(0);
  const auto counting = [counted, malformed](const LogRecord& record) {
    if (record.message != "a line of the test") malformed->fetch_add(1);
    counted->fetch_add(1);
  };
  SetLogSink(counting);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < kLines; ++i) LOG_INFO("a line of the test");
    });
  }
  for (int i = 0; i < 200; ++i) SetLogSink(counting);  // each time a new sink object
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counted->load(), kThreads * kLines);
  EXPECT_EQ(malformed->load(), 0);
}

// A child forked while other threads log can log and install a sink of
// its own at once (the Python package does so in a forked child): the
// state's lock is never inherited held. Without the fork handlers a child
// would hang now and then; the parent waits 10 s for each before failing.
TEST_F(LogSinkTest, AForkedChildLogsAndReplacesTheSinkWhileThreadsLogInTheParent) {
  auto counted = std::make_shared<std::atomic<int>>(0);
  SetLogSink([counted](const LogRecord&) { counted->fetch_add(1); });
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&stop] {
      while (!stop.load()) LOG_INFO("from the parent");
    });
  }
  for (int i = 0; i < 20; ++i) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      int lines = 0;
      SetLogSink([&lines](const LogRecord&) { ++lines; });
      LOG_INFO("from the child");
      ::_exit(lines == 1 ? 0 : 1);
    }
    int status = -1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (::waitpid(child, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(child, SIGKILL);
        ::waitpid(child, &status, 0);
        ADD_FAILURE() << "child " << i << " hung";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << i;
  }
  stop = true;
  for (std::thread& thread : threads) thread.join();
  EXPECT_GT(counted->load(), 0);
}

}  // namespace
}  // namespace loco

// TerminationWatch in this test process: each test installs it first, so
// SIGINT/SIGTERM never take the default action (ending the process) here.
#include "common/termination_watch.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <thread>

namespace loco {
namespace {

using std::chrono::milliseconds;

// A should_stop for Wait that gives up after `polls` calls, so that a signal
// that never arrives fails the test instead of hanging it.
std::function<bool()> GiveUpAfter(int polls) {
  auto calls = std::make_shared<int>(0);
  return [calls, polls] { return ++*calls > polls; };
}

TEST(TerminationWatch, WaitReturnsASignalPendingOnTheBlockedThread) {
  ASSERT_TRUE(TerminationWatch::Install().ok());
  ASSERT_EQ(raise(SIGTERM), 0);  // blocked here: stays pending for sigtimedwait
  EXPECT_EQ(TerminationWatch::Wait(GiveUpAfter(50), milliseconds(100)), SIGTERM);
}

TEST(TerminationWatch, WaitReturnsZeroOnceAskedToStop) {
  ASSERT_TRUE(TerminationWatch::Install().ok());
  EXPECT_EQ(TerminationWatch::Wait([] { return true; }, milliseconds(10)), 0);
  EXPECT_EQ(TerminationWatch::Wait(GiveUpAfter(3), milliseconds(10)), 0);
}

// The case the self-pipe exists for: a thread that does not block the
// signals (as OpenBLAS's pool, started before main) receives one.
TEST(TerminationWatch, WaitSeesASignalCaughtOnAThreadThatDoesNotBlockIt) {
  ASSERT_TRUE(TerminationWatch::Install().ok());
  std::atomic<bool> unblocked{false}, done{false};
  std::thread t([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    unblocked = true;
    for (int i = 0; i < 1000 && !done; ++i) std::this_thread::sleep_for(milliseconds(10));
  });
  for (int i = 0; i < 1000 && !unblocked; ++i) std::this_thread::sleep_for(milliseconds(1));
  ASSERT_TRUE(unblocked);
  ASSERT_EQ(pthread_kill(t.native_handle(), SIGINT), 0);
  EXPECT_EQ(TerminationWatch::Wait(GiveUpAfter(50), milliseconds(100)), SIGINT);
  done = true;
  t.join();
}

TEST(TerminationWatch, StartRunsTheCallbackOnceOnItsOwnThread) {
  ASSERT_TRUE(TerminationWatch::Install().ok());
  std::atomic<int> calls{0}, seen{0};
  std::atomic<bool> on_main{true};
  const std::thread::id main_id = std::this_thread::get_id();
  TerminationWatch watch;
  watch.Start([&](int sig) {
    seen = sig;
    on_main = std::this_thread::get_id() == main_id;
    ++calls;
  });
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);  // process-directed: the watch thread collects it
  for (int i = 0; i < 500 && calls == 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  watch.Stop();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, SIGTERM);
  EXPECT_FALSE(on_main);
}

TEST(TerminationWatch, StopEndsAnIdleWatch) {
  ASSERT_TRUE(TerminationWatch::Install().ok());
  std::atomic<int> calls{0};
  TerminationWatch watch;
  watch.Start([&](int) { ++calls; });
  watch.Stop();
  watch.Stop();  // idempotent
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace loco

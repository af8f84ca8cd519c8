// DisableLockOrderChecks, in child processes (death tests) so that this
// test binary keeps Abseil's default mode.
#include "common/lock_order_checks.h"

#include <absl/synchronization/mutex.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace loco {
namespace {

// Takes two mutexes in one order and then in the other, one thread only:
// no thread ever waits, but the lock-order graph gets a cycle.
void TakeLocksInBothOrders() {
  absl::Mutex a, b;
  {
    absl::MutexLock la(&a);
    absl::MutexLock lb(&b);
  }
  {
    absl::MutexLock lb(&b);
    absl::MutexLock la(&a);
  }
}

// Why the service binaries call it: Debian's Abseil (built without NDEBUG)
// kills the process on such a cycle.
TEST(LockOrderChecks, DebiansAbseilAbortsOnACycleByDefault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(TakeLocksInBothOrders(), "[Dd]eadlock");
}

TEST(LockOrderChecks, DisabledACycleIsNoLongerFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        DisableLockOrderChecks();
        DisableLockOrderChecks();  // idempotent
        TakeLocksInBothOrders();
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace loco

// CoordinatorOutage: the pause a kill-coordinator fault causes.
#include "launch/coordinator_outage.h"

#include <gtest/gtest.h>

namespace loco {
namespace {

using std::chrono::milliseconds;
using Clock = CoordinatorOutage::Clock;

TEST(CoordinatorOutage, PauseRunsFromTheKillUntilTheStepMovesAfterTheRestart) {
  CoordinatorOutage outage;
  const Clock::time_point t0 = Clock::now();
  EXPECT_FALSE(outage.open());
  outage.Killed(t0, 30, milliseconds(1000), "kill-coordinator@30");
  EXPECT_TRUE(outage.down());
  EXPECT_TRUE(outage.open());
  EXPECT_FALSE(outage.restart_due(t0 + milliseconds(999)));
  EXPECT_TRUE(outage.restart_due(t0 + milliseconds(1000)));
  // A step in flight at the kill completes while it is down: not a recovery.
  EXPECT_FALSE(outage.StepObserved(t0 + milliseconds(100), 31).has_value());
  outage.Restarted(t0 + milliseconds(1010), 31);
  EXPECT_FALSE(outage.down());
  EXPECT_TRUE(outage.open());
  EXPECT_FALSE(outage.StepObserved(t0 + milliseconds(1500), 31).has_value());
  auto pause = outage.StepObserved(t0 + milliseconds(2250), 32);
  ASSERT_TRUE(pause.has_value());
  EXPECT_EQ(pause->pause, milliseconds(2250));
  EXPECT_EQ(pause->kills, 1);
  EXPECT_EQ(pause->step_at_kill, 30u);
  EXPECT_EQ(pause->steps_while_down, 1u);
  EXPECT_EQ(pause->resumed_at_step, 32u);
  EXPECT_EQ(pause->fault, "kill-coordinator@30");
  EXPECT_FALSE(outage.open()) << "the outage closes once the step moved";
  EXPECT_FALSE(outage.StepObserved(t0 + milliseconds(3000), 40).has_value());
}

TEST(CoordinatorOutage, KilledAgainBeforeRecoveryIsOneOutageFromTheFirstKill) {
  CoordinatorOutage outage;
  const Clock::time_point t0 = Clock::now();
  outage.Killed(t0, 20, milliseconds(500), "kill-coordinator@20:500");
  outage.Restarted(t0 + milliseconds(520), 20);
  EXPECT_EQ(outage.since_kill(t0 + milliseconds(600)), milliseconds(600));
  outage.Killed(t0 + milliseconds(600), 20, milliseconds(300), "kill-coordinator@20:300");
  EXPECT_TRUE(outage.down());
  EXPECT_FALSE(outage.restart_due(t0 + milliseconds(899)));
  EXPECT_TRUE(outage.restart_due(t0 + milliseconds(900)));
  outage.Restarted(t0 + milliseconds(910), 20);
  auto pause = outage.StepObserved(t0 + milliseconds(1400), 21);
  ASSERT_TRUE(pause.has_value());
  EXPECT_EQ(pause->kills, 2);
  EXPECT_EQ(pause->pause, milliseconds(1400));
  EXPECT_EQ(pause->fault, "kill-coordinator@20:500") << "named by its first kill";
  EXPECT_EQ(pause->steps_while_down, 0u);
  // A later kill is a new outage.
  outage.Killed(t0 + milliseconds(5000), 50, milliseconds(0), "kill-coordinator@50:0");
  EXPECT_TRUE(outage.restart_due(t0 + milliseconds(5000)));
  outage.Restarted(t0 + milliseconds(5001), 50);
  pause = outage.StepObserved(t0 + milliseconds(5100), 51);
  ASSERT_TRUE(pause.has_value());
  EXPECT_EQ(pause->kills, 1);
  EXPECT_EQ(pause->pause, milliseconds(100));
}

}  // namespace
}  // namespace loco

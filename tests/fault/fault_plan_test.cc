// loco-launch's --fault parser: every accepted form, and clear refusals.
#include "launch/fault_plan.h"

#include <gtest/gtest.h>

namespace loco {
namespace {

TEST(FaultPlan, ParsesEveryKindWithAndWithoutTarget) {
  auto f = ParseFaults("kill-worker@50,kill-server@120:1,join-worker@7,kill-worker@60:3");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->size(), 4u);
  EXPECT_EQ((*f)[0].kind, Fault::Kind::kKillWorker);
  EXPECT_EQ((*f)[0].step, 50u);
  EXPECT_EQ((*f)[0].target, -1);
  EXPECT_EQ((*f)[1].kind, Fault::Kind::kKillServer);
  EXPECT_EQ((*f)[1].step, 120u);
  EXPECT_EQ((*f)[1].target, 1);
  EXPECT_EQ((*f)[2].kind, Fault::Kind::kJoinWorker);
  EXPECT_EQ((*f)[3].target, 3);
  for (const Fault& x : *f) {
    auto again = ParseFaults(x.ToString());
    ASSERT_TRUE(again.ok()) << x.ToString();
    EXPECT_EQ((*again)[0].ToString(), x.ToString());
  }
  auto empty = ParseFaults("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(FaultPlan, ParsesKillCoordinatorWithAndWithoutDelay) {
  auto f = ParseFaults("kill-coordinator@30,kill-coordinator@45:2500,kill-coordinator@0:0");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->size(), 3u);
  EXPECT_EQ((*f)[0].kind, Fault::Kind::kKillCoordinator);
  EXPECT_EQ((*f)[0].step, 30u);
  EXPECT_EQ((*f)[0].target, -1);
  EXPECT_EQ((*f)[0].down_ms, -1);
  EXPECT_EQ((*f)[0].coordinator_down_ms(), kDefaultCoordinatorDownMs);
  EXPECT_EQ((*f)[0].ToString(), "kill-coordinator@30");
  EXPECT_EQ((*f)[1].step, 45u);
  EXPECT_EQ((*f)[1].down_ms, 2500);
  EXPECT_EQ((*f)[1].target, -1) << "DELAY_MS is no target";
  EXPECT_EQ((*f)[1].coordinator_down_ms(), 2500);
  EXPECT_EQ((*f)[1].ToString(), "kill-coordinator@45:2500");
  EXPECT_EQ((*f)[2].coordinator_down_ms(), 0) << "an explicit 0 restarts at once";
  for (const Fault& x : *f) {
    auto again = ParseFaults(x.ToString());
    ASSERT_TRUE(again.ok()) << x.ToString();
    EXPECT_EQ((*again)[0].ToString(), x.ToString());
    EXPECT_EQ((*again)[0].coordinator_down_ms(), x.coordinator_down_ms());
  }
  // The longest allowed delay is accepted, and mixes with the other kinds.
  auto mixed = ParseFaults("kill-worker@5,kill-coordinator@9:" +
                           std::to_string(kMaxCoordinatorDownMs) + ",kill-server@12:1");
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  EXPECT_EQ((*mixed)[1].coordinator_down_ms(), kMaxCoordinatorDownMs);
  EXPECT_EQ((*mixed)[2].target, 1);
}

TEST(FaultPlan, RefusesMalformedKillCoordinatorNamingTheDelay) {
  const std::string too_long = "kill-coordinator@3:" + std::to_string(kMaxCoordinatorDownMs + 1);
  for (const std::string& bad :
       {std::string("kill-coordinator"), std::string("kill-coordinator@"),
        std::string("kill-coordinator@x"), std::string("kill-coordinator@3:"),
        std::string("kill-coordinator@3:-1"), std::string("kill-coordinator@3:1s"),
        std::string("kill-coordinator@3:1:2"), too_long, std::string("kill-coordinators@3")}) {
    auto f = ParseFaults(bad);
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(f.status().message().find(bad), std::string::npos) << f.status().message();
    EXPECT_NE(f.status().message().find("kill-coordinator@STEP[:DELAY_MS]"), std::string::npos)
        << f.status().message();
  }
  auto delay = ParseFaults("kill-coordinator@3:1s");
  ASSERT_FALSE(delay.ok());
  EXPECT_NE(delay.status().message().find("DELAY_MS is not a number of milliseconds"),
            std::string::npos)
      << delay.status().message();
}

TEST(FaultPlan, RefusesMalformedEntriesNamingTheAcceptedForms) {
  for (const char* bad : {"kill-worker", "kill-worker@", "kill-worker@x", "explode@3",
                          "join-worker@3:1", "kill-server@3:", "kill-server@3:-1",
                          "kill-worker@-5"}) {
    auto f = ParseFaults(bad);
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(f.status().message().find(bad), std::string::npos) << f.status().message();
    EXPECT_NE(f.status().message().find("kill-worker@STEP"), std::string::npos);
  }
}

// A fault the run cannot reach is refused before anything starts, naming
// the run's bound: a shard or worker that does not exist, a step past
// --steps. join-worker faults add workers; without --steps the steps are
// not known before the run and go unchecked.
TEST(FaultPlan, AFaultTheRunCannotReachIsRefusedNamingTheBound) {
  const auto check = [](const std::string& spec, int servers, int workers, uint64_t steps) {
    auto f = ParseFaults(spec);
    EXPECT_TRUE(f.ok()) << spec;
    return f.ok() ? CheckFaultsFit(*f, servers, workers, steps) : f.status();
  };
  EXPECT_TRUE(check("kill-server@3:1,kill-worker@3:1,kill-coordinator@5", 2, 2, 5).ok());
  EXPECT_TRUE(check("kill-worker@3:2,join-worker@2", 1, 2, 5).ok()) << "the joiner is index 2";
  EXPECT_TRUE(check("kill-worker@9000", 1, 1, 0).ok()) << "steps unknown: unchecked";
  const Status shard = check("kill-server@1:7", 1, 2, 0);
  EXPECT_EQ(shard.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(shard.message().find("fault kill-server@1:7 names shard 7, but the run has 1 "
                                 "server(s) (--servers): SHARD is in [0, 0]"),
            std::string::npos)
      << shard.message();
  const Status worker = check("kill-worker@1:2", 1, 2, 0);
  EXPECT_NE(worker.message().find("INDEX is in [0, 1]"), std::string::npos) << worker.message();
  const Status step = check("kill-worker@5:0", 1, 1, 1);
  EXPECT_EQ(step.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(step.message().find("never fires: the run has 1 steps (--steps)"), std::string::npos)
      << step.message();
}

}  // namespace
}  // namespace loco

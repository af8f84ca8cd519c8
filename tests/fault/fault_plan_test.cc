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

}  // namespace
}  // namespace loco

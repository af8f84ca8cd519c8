// client/step_hyper.h: a trainer's hyper groups are checked as a whole
// (order, coverage of the model, fp32-valid values), and each shard's push
// gets exactly the groups that meet the shard, clipped, values unchanged,
// checked against a per-element expectation computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "client/step_hyper.h"
#include "proto/loco.pb.h"
#include "rpc/step_hyper.h"

namespace loco {
namespace {

constexpr uint64_t kTotal = 10000;

std::vector<HyperGroup> ThreeGroups() {
  return {{0, 1000, 1e-3, 0.9, 0.999, 1e-8, 0.01},
          {1000, 1003, 2e-3, 0.8, 0.99, 1e-6, 0.0},
          {1003, kTotal, 3e-4, 0.95, 0.98, 1e-7, 0.1, /*add_mean=*/true}};
}

// The group holding element i, found by scanning.
const HyperGroup* GroupOf(const std::vector<HyperGroup>& groups, uint64_t i) {
  for (const HyperGroup& g : groups) {
    if (g.begin <= i && i < g.end) return &g;
  }
  return nullptr;
}

TEST(StepHyper, EachShardGetsTheGroupsThatMeetItClipped) {
  const std::vector<HyperGroup> groups = ThreeGroups();
  ASSERT_TRUE(ValidateHyperGroups(groups, kTotal).ok());
  struct Shard {
    uint64_t offset, length;
    size_t groups;
  };
  for (const Shard& shard : {Shard{0, 1000, 1}, Shard{0, 4096, 3}, Shard{999, 2, 2},
                             Shard{1000, 3, 1}, Shard{1001, 5000, 2}, Shard{4096, 5904, 1}}) {
    SCOPED_TRACE("shard [" + std::to_string(shard.offset) + ", +" +
                 std::to_string(shard.length) + ")");
    v1::StepHyper out;
    out.add_groups()->set_lr(42);  // replaced, not appended to
    ASSERT_TRUE(FillShardHyper(groups, shard.offset, shard.length, &out).ok());
    ASSERT_EQ(static_cast<size_t>(out.groups_size()), shard.groups);
    EXPECT_TRUE(ValidateStepHyper(out).ok());
    // Every element of the shard is in exactly one group of the message,
    // with the values of the trainer's group that holds it.
    uint64_t next = shard.offset;
    for (const v1::HyperGroup& g : out.groups()) {
      EXPECT_EQ(g.begin(), next);
      next = g.end();
      for (uint64_t i : {g.begin(), g.end() - 1}) {
        const HyperGroup* source = GroupOf(groups, i);
        ASSERT_NE(source, nullptr);
        EXPECT_EQ(g.lr(), source->lr);
        EXPECT_EQ(g.beta1(), source->beta1);
        EXPECT_EQ(g.beta2(), source->beta2);
        EXPECT_EQ(g.eps(), source->eps);
        EXPECT_EQ(g.weight_decay(), source->weight_decay);
        EXPECT_EQ(g.update(), source->add_mean ? v1::HYPER_UPDATE_ADD_MEAN
                                               : v1::HYPER_UPDATE_ADAMW);
      }
    }
    EXPECT_EQ(next, shard.offset + shard.length);
  }
}

TEST(StepHyper, AShardMeetingMoreGroupsThanAPushMayCarryIsRefused) {
  std::vector<HyperGroup> groups;
  for (uint64_t i = 0; i < kMaxHyperGroups + 1; ++i) {
    groups.push_back({i, i + 1, 1e-3, 0.9, 0.999, 1e-8, i % 2 ? 0.0 : 0.1});
  }
  ASSERT_TRUE(ValidateHyperGroups(groups, kMaxHyperGroups + 1).ok());
  v1::StepHyper out;
  ASSERT_TRUE(FillShardHyper(groups, 0, kMaxHyperGroups, &out).ok());
  EXPECT_EQ(static_cast<size_t>(out.groups_size()), kMaxHyperGroups);
  const Status s = FillShardHyper(groups, 0, kMaxHyperGroups + 1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("more than 4096 hyper groups"), std::string::npos) << s.message();
  EXPECT_EQ(out.groups_size(), 0);
}

TEST(StepHyper, GroupsThatEveryShardWouldRefuseAreRefusedFirst) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    std::string what;
    std::vector<HyperGroup> groups;
    std::string message;
  };
  auto with = [](auto change) {
    std::vector<HyperGroup> g = ThreeGroups();
    change(g);
    return g;
  };
  const std::vector<Case> cases = {
      {"none", {}, "cover [0, 0) of the model's [0, 10000)"},
      {"a gap", with([](auto& g) { g[1].begin = 1001; }), "hyper group 1 [1001, 1003) should "
                                                          "begin at 1000"},
      {"an overlap", with([](auto& g) { g[1].begin = 999; }), "should begin at 1000"},
      {"an empty group", with([](auto& g) { g[1].end = 1000; }), "hyper group 1 [1000, 1000) is "
                                                                 "empty"},
      {"short of the end", with([](auto& g) { g[2].end = kTotal - 1; }),
       "cover [0, 9999) of the model's [0, 10000)"},
      {"past the end", with([](auto& g) { g[2].end = kTotal + 1; }), "passes the model's end"},
      {"NaN lr", with([nan](auto& g) { g[2].lr = nan; }), "hyper group 2 [1003, 10000): lr nan"},
      {"beta1 = 1", with([](auto& g) { g[0].beta1 = 1.0; }), "hyper group 0 [0, 1000): beta1"},
      {"negative weight decay", with([](auto& g) { g[1].weight_decay = -1; }),
       "weight_decay -1"},
      {"lr * weight decay > 1", with([](auto& g) {
         g[0].lr = 2;
         g[0].weight_decay = 1;
       }),
       "lr * weight_decay = 2 exceeds 1"},
      {"eps = 0", with([](auto& g) { g[0].eps = 0; }), "eps 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Status s = ValidateHyperGroups(c.groups, kTotal);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace loco

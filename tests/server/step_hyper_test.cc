// Per-step hyper-parameters (PushRequest.hyper), on ShardMachine driven
// directly: groups with their own lr, betas, eps and weight decay step the
// shard against AdamW in double computed here per group; a change between
// steps takes effect at its step; workers that disagree, and malformed
// groups, are refused with INVALID_ARGUMENT naming the values and change
// nothing, byte for byte; a push without hyper-parameters steps exactly as
// before they existed (the server's flags).
//
// The shard owns [2048, 3048) of a 4096-element model, so the groups are
// clipped to it and the messages speak global indices.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/step_hyper.h"
#include "rpc/step_hyper.h"
#include "server/membership_source.h"
#include "server/push_hyper.h"
#include "server/shard_machine.h"
#include "tests/server/reference.h"
#include "tests/server/shard_machine_fixture.h"

namespace loco::test {
namespace {

constexpr uint64_t kHyperTotal = 4096;
constexpr uint64_t kOffset = 2048;
constexpr uint64_t kHyperLength = 1000;  // not a multiple of the 128 block
constexpr uint64_t kHyperWorkerA = 1, kHyperWorkerB = 2;



v1::HyperGroup Group(uint64_t begin, uint64_t end, double lr, double weight_decay,
                     double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8) {
  v1::HyperGroup g;
  g.set_begin(begin);
  g.set_end(end);
  g.set_lr(lr);
  g.set_beta1(beta1);
  g.set_beta2(beta2);
  g.set_eps(eps);
  g.set_weight_decay(weight_decay);
  return g;
}

v1::StepHyper HyperOf(const std::vector<v1::HyperGroup>& groups) {
  v1::StepHyper hyper;
  for (const auto& g : groups) *hyper.add_groups() = g;
  return hyper;
}

// The fp32 values the server applies, as the reference reads them.
AdamWParams AdamWOf(const v1::HyperGroup& g) {
  AdamWParams p;
  p.lr = static_cast<float>(g.lr());
  p.beta1 = static_cast<float>(g.beta1());
  p.beta2 = static_cast<float>(g.beta2());
  p.eps = static_cast<float>(g.eps());
  p.weight_decay = static_cast<float>(g.weight_decay());
  return p;
}

// A reference group over shard-local [begin, end) with `g`'s values.
ReferenceGroupedAdamW::Group Local(size_t begin, size_t end, const v1::HyperGroup& g) {
  return {begin, end, AdamWOf(g)};
}

class StepHyperTest : public ::testing::Test {
 protected:
  StepHyperTest() : shard_(FixtureMachineOptions(), &membership_) {}

  void SetUp() override {
    init_ = RandomVector(kHyperLength, 11);
    v1::InitShardRequest req;
    req.set_worker_id(kHyperWorkerA);
    req.set_shard_id(0);
    *req.mutable_params() = Fp32Payload(init_, kOffset);
    v1::InitShardResponse resp;
    const Status s = shard_.InitShard(req, &resp);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // A push of `gradient` with `hyper` (none when null).
  Status Push(uint64_t worker, uint64_t step, const std::vector<float>& gradient,
              const v1::StepHyper* hyper, v1::PushResponse* resp = nullptr) {
    v1::PushRequest req;
    req.set_worker_id(worker);
    req.set_shard_id(0);
    req.set_step(step);
    *req.mutable_gradient() = Fp32Payload(gradient, kOffset);
    if (hyper != nullptr) *req.mutable_hyper() = *hyper;
    v1::PushResponse ignored;
    return shard_.Push(&req, resp ? resp : &ignored);
  }

  FakeMembership membership_{{kHyperWorkerA, kHyperWorkerB}, kOffset, kHyperLength, kHyperTotal};
  ShardMachine shard_;
  std::vector<float> init_;
};

TEST_F(StepHyperTest, TwoGroupsStepWithTheirOwnLrBetasEpsAndWeightDecay) {
  // Group 0 begins before the shard and group 1 ends after it: the shard
  // steps [2048, 2448) with group 0 and [2448, 3048) with group 1.
  const v1::HyperGroup decayed = Group(0, 2448, 1e-2, 0.1);
  const v1::HyperGroup plain = Group(2448, kHyperTotal, 3e-3, 0.0, 0.8, 0.99, 1e-6);
  const v1::StepHyper hyper = HyperOf({decayed, plain});
  ReferenceGroupedAdamW reference(init_);
  for (uint64_t step = 0; step < 3; ++step) {
    const auto a = RandomVector(kHyperLength, 20 + 2 * step);
    const auto b = RandomVector(kHyperLength, 21 + 2 * step);
    ASSERT_TRUE(Push(kHyperWorkerA, step, a, &hyper).ok());
    v1::PushResponse resp;
    const Status s = Push(kHyperWorkerB, step, b, &hyper, &resp);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(resp.version(), step + 1);
    reference.Step(MeanOfTwo(a, b), {Local(0, 400, decayed), Local(400, kHyperLength, plain)});
    const ShardStore store = shard_.Snapshot();
    EXPECT_TRUE(AllNear(store.params(), reference.params(), 1e-5)) << "step " << step;
    EXPECT_TRUE(AllNear(store.m(), reference.m(), 1e-6)) << "step " << step;
    EXPECT_TRUE(AllNear(store.v(), reference.v(), 1e-6)) << "step " << step;
  }
}

// An add_mean group (values kept equal on every worker, such as BatchNorm
// statistics): its elements take p + the mean push, their moments stay
// zero, and the AdamW group beside it steps as it would alone. A worker
// that asks for the other update on those elements is refused.
TEST_F(StepHyperTest, AnAddMeanGroupAddsTheMeanPushAndTheRestStepsAdamW) {
  const v1::HyperGroup decayed = Group(0, 2448, 1e-2, 0.1);
  v1::HyperGroup synced = Group(2448, kHyperTotal, 1e-3, 0.0);
  synced.set_update(v1::HYPER_UPDATE_ADD_MEAN);
  const v1::StepHyper hyper = HyperOf({decayed, synced});
  const std::vector<float> head(init_.begin(), init_.begin() + 400);
  ReferenceGroupedAdamW reference(head);
  std::vector<double> synced_values(init_.begin() + 400, init_.end());
  for (uint64_t step = 0; step < 3; ++step) {
    const auto a = RandomVector(kHyperLength, 60 + 2 * step);
    const auto b = RandomVector(kHyperLength, 61 + 2 * step);
    ASSERT_TRUE(Push(kHyperWorkerA, step, a, &hyper).ok());
    ASSERT_TRUE(Push(kHyperWorkerB, step, b, &hyper).ok());
    const std::vector<double> mean = MeanOfTwo(a, b);
    reference.Step({mean.begin(), mean.begin() + 400}, {Local(0, 400, decayed)});
    for (size_t i = 400; i < kHyperLength; ++i) synced_values[i - 400] += mean[i];
    const ShardStore store = shard_.Snapshot();
    ASSERT_EQ(store.version(), step + 1);
    const std::vector<float> params = store.params();
    EXPECT_TRUE(AllNear({params.begin(), params.begin() + 400}, reference.params(), 1e-5));
    EXPECT_TRUE(AllNear({params.begin() + 400, params.end()}, synced_values, 1e-6))
        << "step " << step << ": the add_mean group did not take p + mean push";
    for (size_t i = 400; i < kHyperLength; ++i) {
      ASSERT_EQ(store.m()[i], 0.0f) << "element " << i << " got an AdamW moment";
      ASSERT_EQ(store.v()[i], 0.0f) << "element " << i << " got an AdamW moment";
    }
  }
  // Step 3: A asks for add_mean, B for AdamW on the same elements.
  const v1::StepHyper adamw_everywhere = HyperOf({decayed, Group(2448, kHyperTotal, 1e-3, 0.0)});
  ASSERT_TRUE(Push(kHyperWorkerA, 3, RandomVector(kHyperLength, 70), &hyper).ok());
  const Status refused = Push(kHyperWorkerB, 3, RandomVector(kHyperLength, 71), &adamw_everywhere);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.ToString();
  EXPECT_NE(refused.message().find("update add_mean vs adamw"), std::string::npos)
      << refused.ToString();
  EXPECT_EQ(shard_.Snapshot().version(), 3u);
}

TEST_F(StepHyperTest, ALearningRateChangedBetweenStepsTakesEffectAtItsStep) {
  const v1::HyperGroup before = Group(0, kHyperTotal, 1e-2, 0.01);
  const v1::HyperGroup after = Group(0, kHyperTotal, 2e-3, 0.01);  // a scheduler's next value
  ReferenceGroupedAdamW reference(init_), unchanged(init_);
  for (uint64_t step = 0; step < 2; ++step) {
    const v1::StepHyper hyper = HyperOf({step == 0 ? before : after});
    const auto a = RandomVector(kHyperLength, 40 + 2 * step);
    const auto b = RandomVector(kHyperLength, 41 + 2 * step);
    ASSERT_TRUE(Push(kHyperWorkerA, step, a, &hyper).ok());
    ASSERT_TRUE(Push(kHyperWorkerB, step, b, &hyper).ok());
    reference.Step(MeanOfTwo(a, b), {Local(0, kHyperLength, step == 0 ? before : after)});
    unchanged.Step(MeanOfTwo(a, b), {Local(0, kHyperLength, before)});
    const ShardStore store = shard_.Snapshot();
    ASSERT_EQ(store.version(), step + 1);
    EXPECT_TRUE(AllNear(store.params(), reference.params(), 1e-5)) << "step " << step;
    EXPECT_TRUE(AllNear(store.m(), reference.m(), 1e-6));
    EXPECT_TRUE(AllNear(store.v(), reference.v(), 1e-6));
  }
  EXPECT_FALSE(AllNear(shard_.Snapshot().params(), unchanged.params(), 1e-5))
      << "the step-1 learning rate made no difference";
}

TEST_F(StepHyperTest, WorkersThatDisagreeAreRefusedWithBothValuesAndNothingChanges) {
  const v1::HyperGroup first = Group(0, 2448, 1e-3, 0.0);
  const v1::HyperGroup second = Group(2448, kHyperTotal, 1e-3, 0.01);
  const v1::StepHyper fixed = HyperOf({first, second});
  const auto a = RandomVector(kHyperLength, 50);
  ASSERT_TRUE(Push(kHyperWorkerA, 0, a, &fixed).ok());
  const CapturedShard held = Capture(shard_);
  ASSERT_EQ(held.pending, 1u);

  struct Case {
    std::string what;
    std::optional<v1::StepHyper> hyper;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases = {
      {"another lr", HyperOf({Group(0, kHyperTotal, 2e-3, 0.0)}),
       {"the workers of step 0 disagree", "lr 0.001 vs 0.002 on [2048, 2448)",
        "(group 0 vs group 0)"}},
      {"another weight decay in the second group",
       HyperOf({first, Group(2448, kHyperTotal, 1e-3, 0.02)}),
       {"weight_decay 0.01 vs 0.02 on [2448, 3048)", "(group 1 vs group 1)"}},
      {"other betas and eps", HyperOf({Group(0, 2448, 1e-3, 0.0, 0.95, 0.98, 1e-6), second}),
       {"beta1 0.9 vs 0.95, beta2 0.999 vs 0.98, eps 1e-08 vs 1e-06 on [2048, 2448)"}},
      {"no hyper-parameters: the server's flags", std::nullopt,
       {"lr 0.001 vs 0.01, weight_decay 0 vs 0.1 on [2048, 2448)",
        "(group 0 vs the server's flags)"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Status s =
        Push(kHyperWorkerB, 0, RandomVector(kHyperLength, 51), c.hyper ? &*c.hyper : nullptr);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    for (const std::string& part : c.message) {
      EXPECT_NE(s.message().find(part), std::string::npos) << part << " not in: " << s.message();
    }
    EXPECT_TRUE(Unchanged(held, Capture(shard_)));
  }

  // The same values in other groups agree: the comparison is per element.
  const v1::StepHyper regrouped = HyperOf(
      {Group(0, 2048, 1e-3, 0.0), Group(2048, 2448, 1e-3, 0.0), Group(2448, 3100, 1e-3, 0.01),
       Group(3100, kHyperTotal, 1e-3, 0.01)});
  const auto b = RandomVector(kHyperLength, 52);
  const Status s = Push(kHyperWorkerB, 0, b, &regrouped);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ReferenceGroupedAdamW reference(init_);
  reference.Step(MeanOfTwo(a, b), {Local(0, 400, first), Local(400, kHyperLength, second)});
  const ShardStore store = shard_.Snapshot();
  EXPECT_EQ(store.version(), 1u);
  EXPECT_TRUE(AllNear(store.params(), reference.params(), 1e-5));
}

TEST_F(StepHyperTest, ADuplicateWithOtherHyperParametersIsAcknowledgedOnce) {
  const v1::StepHyper fixed = HyperOf({Group(0, kHyperTotal, 1e-3, 0.0)});
  const v1::StepHyper other = HyperOf({Group(0, kHyperTotal, 5e-3, 0.0)});
  const auto a = RandomVector(kHyperLength, 60);
  ASSERT_TRUE(Push(kHyperWorkerA, 0, a, &fixed).ok());
  const CapturedShard held = Capture(shard_);
  v1::PushResponse resp;
  ASSERT_TRUE(Push(kHyperWorkerA, 0, RandomVector(kHyperLength, 61), &other, &resp).ok());
  EXPECT_TRUE(resp.duplicate());
  EXPECT_TRUE(Unchanged(held, Capture(shard_)));

  const auto b = RandomVector(kHyperLength, 62);
  ASSERT_TRUE(Push(kHyperWorkerB, 0, b, &fixed).ok());
  ReferenceGroupedAdamW reference(init_);
  reference.Step(MeanOfTwo(a, b), {Local(0, kHyperLength, fixed.groups(0))});
  EXPECT_TRUE(AllNear(shard_.Snapshot().params(), reference.params(), 1e-5));
}

TEST_F(StepHyperTest, MalformedHyperParametersAreRefusedAndChangeNothing) {
  // A populated state: one step applied (m, v non-zero), one push held.
  ASSERT_TRUE(Push(kHyperWorkerA, 0, RandomVector(kHyperLength, 70), nullptr).ok());
  ASSERT_TRUE(Push(kHyperWorkerB, 0, RandomVector(kHyperLength, 71), nullptr).ok());
  const v1::StepHyper valid = HyperOf({Group(0, kHyperTotal, 1e-3, 0.0)});
  ASSERT_TRUE(Push(kHyperWorkerA, 1, RandomVector(kHyperLength, 72), &valid).ok());
  const CapturedShard before = Capture(shard_);
  ASSERT_EQ(before.version, 1u);
  ASSERT_EQ(before.pending, 1u);

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<v1::HyperGroup> many;
  for (uint64_t i = 0; i <= kMaxHyperGroups; ++i) many.push_back(Group(i, i + 1, 1e-3, 0.0));
  struct Case {
    std::string what;
    v1::StepHyper hyper;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"overlap", HyperOf({Group(0, 2500, 1e-3, 0), Group(2400, kHyperTotal, 1e-3, 0)}),
       "hyper group 1 [2400, 4096) begins before hyper group 0 [0, 2500) ends"},
      {"unsorted", HyperOf({Group(2448, kHyperTotal, 1e-3, 0), Group(0, 2448, 1e-3, 0)}),
       "hyper group 1 [0, 2448) begins before hyper group 0"},
      {"empty group", HyperOf({Group(0, 0, 1e-3, 0), Group(0, kHyperTotal, 1e-3, 0)}),
       "hyper group 0 [0, 0) is empty"},
      {"reversed group", HyperOf({Group(3000, 2500, 1e-3, 0)}), "hyper group 0 [3000, 2500)"},
      {"a gap in the shard", HyperOf({Group(0, 2400, 1e-3, 0), Group(2500, kHyperTotal, 1e-3, 0)}),
       "leave [2400, 2500) of this shard's range [2048, 3048) in no group"},
      {"the shard's start uncovered", HyperOf({Group(2100, kHyperTotal, 1e-3, 0)}),
       "leave [2048, 2100)"},
      {"the shard's end uncovered", HyperOf({Group(0, 3000, 1e-3, 0)}), "leave [3000, 3048)"},
      {"no group at all", HyperOf({}), "leave [2048, 3048)"},
      {"only groups outside the shard", HyperOf({Group(0, 1000, 1e-3, 0)}),
       "leave [2048, 3048)"},
      {"NaN lr", HyperOf({Group(0, kHyperTotal, nan, 0)}), "hyper group 0 [0, 4096): lr nan"},
      {"infinite lr", HyperOf({Group(0, kHyperTotal, inf, 0)}), "hyper group 0 [0, 4096): lr inf"},
      {"negative lr", HyperOf({Group(0, kHyperTotal, -1e-3, 0)}), "lr -0.001"},
      {"lr beyond fp32", HyperOf({Group(0, kHyperTotal, 1e300, 0)}), "lr 1e+300 is beyond fp32"},
      {"beta1 = 1", HyperOf({Group(0, kHyperTotal, 1e-3, 0, 1.0)}),
       "hyper group 0 [0, 4096): beta1"},
      {"beta1 rounding to 1 in fp32", HyperOf({Group(0, kHyperTotal, 1e-3, 0, 1 - 1e-12)}),
       "beta1 1 is not in [0, 1)"},
      {"negative beta2", HyperOf({Group(0, kHyperTotal, 1e-3, 0, 0.9, -0.5)}), "beta2 -0.5"},
      {"eps = 0", HyperOf({Group(0, kHyperTotal, 1e-3, 0, 0.9, 0.999, 0.0)}), "eps 0"},
      {"eps rounding to 0 in fp32", HyperOf({Group(0, kHyperTotal, 1e-3, 0, 0.9, 0.999, 1e-50)}),
       "eps 0"},
      {"negative weight decay", HyperOf({Group(0, kHyperTotal, 1e-3, -0.1)}), "weight_decay -0.1"},
      {"lr * weight decay > 1", HyperOf({Group(0, kHyperTotal, 0.5, 3.0)}),
       "lr * weight_decay = 1.5 exceeds 1"},
      {"an unknown update", [] {
         v1::HyperGroup g = Group(0, kHyperTotal, 1e-3, 0);
         g.set_update(static_cast<v1::HyperUpdate>(7));
         return HyperOf({g});
       }(), "hyper group 0 [0, 4096): update 7 is unknown"},
      {"a bad group outside the shard",
       HyperOf({Group(0, 1000, nan, 0), Group(1000, kHyperTotal, 1e-3, 0)}),
       "hyper group 0 [0, 1000): lr nan"},
      {"too many groups", HyperOf(many), "4097 groups; at most 4096"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Status s = Push(kHyperWorkerB, 1, RandomVector(kHyperLength, 73), &c.hyper);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(c.message), std::string::npos)
        << c.message << " not in: " << s.message();
    EXPECT_TRUE(Unchanged(before, Capture(shard_)));
  }
  // Gaps outside the shard are no concern of this shard's.
  const v1::StepHyper gaps_outside =
      HyperOf({Group(10, 20, 5e-3, 0), Group(2000, 3100, 1e-3, 0)});
  const Status s = Push(kHyperWorkerB, 1, RandomVector(kHyperLength, 74), &gaps_outside);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(shard_.Snapshot().version(), 2u);
}

// A push without hyper-parameters steps exactly as before they existed:
// ShardStore::Apply of the mean with the server's flags, bit for bit, and
// so does a push whose hyper-parameters are the flags' values.
TEST_F(StepHyperTest, APushWithoutHyperParametersStepsWithTheServersFlags) {
  FakeMembership membership{{kHyperWorkerA, kHyperWorkerB}, kOffset, kHyperLength, kHyperTotal};
  ShardMachine explicit_flags(FixtureMachineOptions(), &membership);
  {
    v1::InitShardRequest req;
    req.set_worker_id(kHyperWorkerA);
    req.set_shard_id(0);
    *req.mutable_params() = Fp32Payload(init_, kOffset);
    v1::InitShardResponse resp;
    ASSERT_TRUE(explicit_flags.InitShard(req, &resp).ok());
  }
  const v1::StepHyper flags = HyperOf({Group(0, kHyperTotal, 0.01, 0.1, 0.9, 0.999, 1e-8)});

  ShardStore today;
  ASSERT_TRUE(today.Initialize(ShardRange{kOffset, kHyperLength}, init_).ok());
  ReferenceAdamW reference(init_, FixtureMachineOptions().hyper);
  for (uint64_t step = 0; step < 2; ++step) {
    const auto a = RandomVector(kHyperLength, 80 + 2 * step);
    const auto b = RandomVector(kHyperLength, 81 + 2 * step);
    ASSERT_TRUE(Push(kHyperWorkerA, step, a, nullptr).ok());
    ASSERT_TRUE(Push(kHyperWorkerB, step, b, nullptr).ok());
    // One push with the flags' values, one without: they agree.
    for (uint64_t worker : {kHyperWorkerA, kHyperWorkerB}) {
      v1::PushRequest req;
      req.set_worker_id(worker);
      req.set_shard_id(0);
      req.set_step(step);
      *req.mutable_gradient() = Fp32Payload(worker == kHyperWorkerA ? a : b, kOffset);
      if (worker == kHyperWorkerA) *req.mutable_hyper() = flags;
      v1::PushResponse resp;
      const Status s = explicit_flags.Push(&req, &resp);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }

    StepAggregator payloads;
    payloads.Open(step);
    for (const auto* g : {&a, &b}) {
      auto owned =
          OwnedPayload::FromProto(Fp32Payload(*g, kOffset), ShardRange{kOffset, kHyperLength});
      ASSERT_TRUE(owned.ok());
      payloads.Add(g == &a ? kHyperWorkerA : kHyperWorkerB, std::move(owned).value());
    }
    std::vector<float> mean;
    ASSERT_TRUE(payloads.Mean(kHyperLength, &mean).ok());
    ASSERT_TRUE(today.Apply(mean, FixtureMachineOptions().hyper, nullptr).ok());
    reference.Step(MeanOfTwo(a, b));

    for (const ShardMachine* machine : {&shard_, &explicit_flags}) {
      const ShardStore store = machine->Snapshot();
      EXPECT_EQ(store.version(), step + 1);
      EXPECT_TRUE(SameBytes(store.params(), today.params())) << "step " << step;
      EXPECT_TRUE(SameBytes(store.m(), today.m())) << "step " << step;
      EXPECT_TRUE(SameBytes(store.v(), today.v())) << "step " << step;
    }
    EXPECT_TRUE(AllNear(today.params(), reference.params(), 1e-5));
  }
}

// What the client sends each shard (FillShardHyper) is what the shard
// reads (PushHyper): the groups that meet it, clipped, in local indices.
TEST(PushHyper, EachShardReadsTheClientsGroupsClippedToIt) {
  const std::vector<HyperGroup> groups = {{0, 100, 1e-3, 0.9, 0.999, 1e-8, 0.1},
                                          {100, 2500, 2e-3, 0.8, 0.99, 1e-6, 0.0},
                                          {2500, kHyperTotal, 3e-3, 0.9, 0.95, 1e-7, 0.05}};
  ASSERT_TRUE(ValidateHyperGroups(groups, kHyperTotal).ok());
  AdamWParams flags;
  flags.max_grad_norm = 2.5f;
  // Per shard: each span's shard-local begin and end, and the index of its
  // group in the message that shard received.
  const std::vector<std::pair<ShardRange, std::vector<std::array<uint64_t, 3>>>> shards = {
      {{0, 2048}, {{0, 100, 0}, {100, 2048, 1}}},
      {{2048, 1024}, {{0, 452, 0}, {452, 1024, 1}}},
      {{3072, 1024}, {{0, 1024, 0}}},
  };
  for (const auto& [range, expected] : shards) {
    SCOPED_TRACE("shard at " + std::to_string(range.offset));
    v1::PushRequest push;
    ASSERT_TRUE(FillShardHyper(groups, range.offset, range.length, push.mutable_hyper()).ok());
    for (const auto& g : push.hyper().groups()) {
      EXPECT_GE(g.begin(), range.offset);
      EXPECT_LE(g.end(), range.offset + range.length);
    }
    auto read = PushHyper(push, range, flags);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    ASSERT_TRUE(read->Validate(range.length).ok());
    EXPECT_EQ(read->max_grad_norm(), 2.5f);
    ASSERT_EQ(read->spans().size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      const HyperSpan& span = read->spans()[i];
      EXPECT_EQ(span.begin, expected[i][0]);
      EXPECT_EQ(span.end, expected[i][1]);
      EXPECT_EQ(span.group, static_cast<int>(expected[i][2]));
      // The global group this span lies in, found independently.
      const uint64_t global = range.offset + span.begin;
      const HyperGroup* source = nullptr;
      for (const HyperGroup& g : groups) {
        if (g.begin <= global && global < g.end) source = &g;
      }
      ASSERT_NE(source, nullptr);
      EXPECT_EQ(span.params.lr, static_cast<float>(source->lr));
      EXPECT_EQ(span.params.beta1, static_cast<float>(source->beta1));
      EXPECT_EQ(span.params.beta2, static_cast<float>(source->beta2));
      EXPECT_EQ(span.params.eps, static_cast<float>(source->eps));
      EXPECT_EQ(span.params.weight_decay, static_cast<float>(source->weight_decay));
      EXPECT_EQ(span.params.max_grad_norm, 2.5f);
    }
  }
  // No hyper-parameters: the flags over the whole shard.
  auto flags_only = PushHyper(v1::PushRequest(), ShardRange{2048, 1024}, flags);
  ASSERT_TRUE(flags_only.ok());
  ASSERT_EQ(flags_only->spans().size(), 1u);
  EXPECT_EQ(flags_only->spans()[0].end, 1024u);
  EXPECT_EQ(flags_only->spans()[0].group, -1);
  EXPECT_EQ(flags_only->spans()[0].params.lr, flags.lr);
}

}  // namespace
}  // namespace loco::test

// Worker::SetStepHyper against real in-process servers on loopback: the
// pushes carry the trainer's per-group AdamW hyper-parameters, the shards
// step with them (checked against torch.optim.AdamW's update in double, per
// element), a change (a schedule) takes effect at the next step, an empty
// set goes back to the servers' flags, bad groups are refused without
// changing what later steps send, and two workers that disagree get a
// clear INVALID_ARGUMENT: the refused one withdraws from the step, the
// other's step completes without it, and the refused one recovers.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <future>
#include <thread>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "client/step_hyper.h"
#include "client/worker.h"
#include "common/gradient_ready.h"
#include "tests/client/worker_cluster.h"
#include "tests/common/random_batch.h"

namespace loco {
namespace {

using namespace cluster_fixture;  // NOLINT: the fixture of every test here

// torch.optim.AdamW's update in double with per-element hyper-parameters:
// decoupled decay p *= 1 - lr * wd first, then the bias-corrected Adam
// step with eps outside the square root.
class ReferenceGroupAdamW {
 public:
  explicit ReferenceGroupAdamW(const std::vector<float>& init)
      : p_(init.begin(), init.end()), m_(init.size()), v_(init.size()) {}

  void Step(const std::vector<HyperGroup>& groups, const std::vector<double>& g) {
    ++t_;
    for (const HyperGroup& h : groups) {
      const double c1 = 1 - std::pow(h.beta1, t_), c2 = 1 - std::pow(h.beta2, t_);
      for (uint64_t i = h.begin; i < h.end; ++i) {
        p_[i] *= 1 - h.lr * h.weight_decay;
        m_[i] = h.beta1 * m_[i] + (1 - h.beta1) * g[i];
        v_[i] = h.beta2 * v_[i] + (1 - h.beta2) * g[i] * g[i];
        p_[i] -= h.lr * (m_[i] / c1) / (std::sqrt(v_[i] / c2) + h.eps);
      }
    }
  }
  const std::vector<double>& params() const { return p_; }

 private:
  std::vector<double> p_, m_, v_;
  int t_ = 0;
};

// The servers' flags (worker_cluster.h) as one group over the model.
std::vector<HyperGroup> FlagGroups(size_t n) { return {{0, n, 1e-3, 0.9, 0.999, 1e-8, 0.0}}; }

// Largest |a - b| / max(1e-3, |b|) over the model.
double MaxRelativeError(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1e-3, std::abs(b[i])));
  }
  return worst;
}

std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Three groups, the middle one across the shard boundary at 512, with
// values unlike the servers' flags; group 0 follows a step schedule, and the
// last two steps use the flags again (an empty set).
TEST(WorkerStepHyperTest, ShardsStepWithTheWorkersGroupsAndFollowAChange) {
  Cluster cluster;
  std::unique_ptr<Worker> w = JoinedWorker(cluster.Options(PushCodec::kFp32));
  ASSERT_NE(w, nullptr);
  const std::vector<float> init = Uniform(kElements, 7, -1, 1);
  std::vector<float> params;
  ASSERT_TRUE(w->InitParameters(init, &params).ok());
  ReferenceGroupAdamW reference(init);

  std::vector<HyperGroup> groups = {{0, 300, 1e-2, 0.9, 0.999, 1e-8, 0.1},
                                    {300, 700, 5e-3, 0.8, 0.99, 1e-8, 0.0},
                                    {700, kElements, 2e-3, 0.95, 0.999, 1e-6, 0.01}};
  ASSERT_TRUE(w->SetStepHyper(groups).ok());
  for (uint64_t t = 0; t < 8; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    if (t == 3) {  // a schedule: group 0's lr drops tenfold
      groups[0].lr = 1e-3;
      ASSERT_TRUE(w->SetStepHyper(groups).ok());
    }
    if (t == 6) {  // back to the servers' flags
      ASSERT_TRUE(w->SetStepHyper({}).ok());
    }
    const std::vector<float> g = Uniform(kElements, 100 + t, -0.5f, 0.5f);
    auto r = w->Step(g, &params);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    reference.Step(t < 6 ? groups : FlagGroups(kElements), ToDouble(g));
    EXPECT_LT(MaxRelativeError(params, reference.params()), 1e-5);
  }
  // Had the groups not reached the servers, the flags' run would match.
  ReferenceGroupAdamW flags_only(init);
  for (uint64_t t = 0; t < 8; ++t) {
    flags_only.Step(FlagGroups(kElements), ToDouble(Uniform(kElements, 100 + t, -0.5f, 0.5f)));
  }
  EXPECT_GT(MaxRelativeError(params, flags_only.params()), 1e-2);
  EXPECT_TRUE(w->Leave().ok());
}

// Refused calls: before Join, and groups that do not cover the model in
// order or hold a value fp32 AdamW cannot take. Each leaves the groups set
// before in force.
TEST(WorkerStepHyperTest, BadGroupsAreRefusedAndTheEarlierOnesStayInForce) {
  Cluster cluster;
  auto unjoined = Worker::Connect(cluster.Options(PushCodec::kFp32));
  ASSERT_TRUE(unjoined.ok());
  EXPECT_EQ((*unjoined)->SetStepHyper(FlagGroups(kElements)).code(),
            StatusCode::kFailedPrecondition);

  std::unique_ptr<Worker> w = JoinedWorker(cluster.Options(PushCodec::kFp32));
  ASSERT_NE(w, nullptr);
  const std::vector<float> init = Uniform(kElements, 9, -1, 1);
  std::vector<float> params;
  ASSERT_TRUE(w->InitParameters(init, &params).ok());
  const std::vector<HyperGroup> good = {{0, kElements, 3e-2, 0.9, 0.999, 1e-8, 0.05}};
  ASSERT_TRUE(w->SetStepHyper(good).ok());

  struct Case {
    const char* what;
    std::vector<HyperGroup> groups;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"a gap", {{0, 400, 1e-3, 0.9, 0.999, 1e-8, 0}, {500, kElements, 1e-3, 0.9, 0.999, 1e-8, 0}},
       "should begin at 400"},
      {"short of the end", {{0, 999, 1e-3, 0.9, 0.999, 1e-8, 0}}, "every element needs a group"},
      {"past the end", {{0, kElements + 1, 1e-3, 0.9, 0.999, 1e-8, 0}}, "passes the model's end"},
      {"beta1 of 1", {{0, kElements, 1e-3, 1.0, 0.999, 1e-8, 0}}, "beta1"},
      {"a NaN lr", {{0, kElements, std::nan(""), 0.9, 0.999, 1e-8, 0}}, "lr"},
      {"negative decay", {{0, kElements, 1e-3, 0.9, 0.999, 1e-8, -1}}, "weight_decay"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Status s = w->SetStepHyper(c.groups);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.ToString();
  }
  ReferenceGroupAdamW reference(init);
  for (uint64_t t = 0; t < 3; ++t) {
    const std::vector<float> g = Uniform(kElements, 200 + t, -0.5f, 0.5f);
    auto r = w->Step(g, &params);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    reference.Step(good, ToDouble(g));
  }
  EXPECT_LT(MaxRelativeError(params, reference.params()), 1e-5);
  EXPECT_TRUE(w->Leave().ok());
}

// The value of the counter `name` of a server's shard (its metrics).
double ServerCounter(ParameterServer& server, const std::string& name) {
  for (const prometheus::MetricFamily& family : server.metrics_registry().Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& m : family.metric) return m.counter.value;
  }
  return -1;
}

// Two workers joined with the same options and initial parameters; b is
// null when either failed to join or to initialise (a test failure then).
struct TwoWorkers {
  std::unique_ptr<Worker> a, b;
  std::vector<float> pa, pb;
};
TwoWorkers JoinTwo(const WorkerOptions& o, const std::vector<float>& init) {
  TwoWorkers two;
  two.a = JoinedWorker(o);
  auto b = JoinedWorker(o);
  if (two.a == nullptr || b == nullptr) return two;
  const bool a_ok = two.a->InitParameters(init, &two.pa).ok();
  const bool b_ok = b->InitParameters(init, &two.pb).ok();
  EXPECT_TRUE(a_ok && b_ok);
  if (a_ok && b_ok) two.b = std::move(b);
  return two;
}

// Two workers of one step send different lr: whichever push reaches the one
// shard first fixes the step's values, and the other worker's Step fails
// with INVALID_ARGUMENT naming the disagreement and withdraws from the step
// (PushRequest.withdraw). The refused worker then does nothing, as a
// trainer that stopped on the error (a notebook showing it) does, and stays
// joined: the winner's step still completes, with its values on its own
// gradient, instead of waiting until step_timeout_ms (30 s here) and
// failing (DEADLINE_EXCEEDED, as it did before withdrawals). Once the
// refused worker sends the same values it resynchronises to the winner's
// parameters, and the next step takes both gradients.
TEST(WorkerStepHyperTest, ARefusedWorkerWithdrawsAndTheWinnersStepCompletesWithoutIt) {
  Cluster cluster(/*shards=*/1);
  WorkerOptions o = cluster.Options(PushCodec::kFp32);
  o.step_timeout_ms = 30000;
  const std::vector<float> init = Uniform(kElements, 11, -1, 1);
  TwoWorkers two = JoinTwo(o, init);
  ASSERT_NE(two.b, nullptr);
  std::unique_ptr<Worker>& a = two.a;
  std::unique_ptr<Worker>& b = two.b;
  const std::vector<HyperGroup> ha = {{0, kElements, 1e-2, 0.9, 0.999, 1e-8, 0}};
  const std::vector<HyperGroup> hb = {{0, kElements, 2e-2, 0.9, 0.999, 1e-8, 0}};
  ASSERT_TRUE(a->SetStepHyper(ha).ok());
  ASSERT_TRUE(b->SetStepHyper(hb).ok());
  const std::vector<float> ga = Uniform(kElements, 300, -0.5f, 0.5f);
  const std::vector<float> gb = Uniform(kElements, 301, -0.5f, 0.5f);

  // Both steps return: the refused one at once, and the winner's once the
  // refused worker withdrew (the refused one does nothing more meanwhile).
  auto step_a = std::async(std::launch::async, [&] { return a->Step(ga, &two.pa); });
  auto step_b = std::async(std::launch::async, [&] { return b->Step(gb, &two.pb); });
  StatusOr<StepResult> ra = step_a.get();
  StatusOr<StepResult> rb = step_b.get();
  ASSERT_NE(ra.ok(), rb.ok()) << "A: " << ra.status().ToString()
                              << "\nB: " << rb.status().ToString()
                              << "\n(both failed: the winner waited for the refused worker; both "
                                 "succeeded: pushes with different lr were both accepted)";
  const bool a_refused = !ra.ok();
  Worker& refused = a_refused ? *a : *b;
  const Status refusal = a_refused ? ra.status() : rb.status();
  std::vector<float>& refused_params = a_refused ? two.pa : two.pb;
  const std::vector<float>& winner_params = a_refused ? two.pb : two.pa;
  const std::vector<float>& refused_grads = a_refused ? ga : gb;
  const std::vector<float>& winner_grads = a_refused ? gb : ga;
  const std::vector<HyperGroup>& winner = a_refused ? hb : ha;
  EXPECT_EQ(refusal.code(), StatusCode::kInvalidArgument) << refusal.ToString();
  EXPECT_NE(refusal.message().find("lr"), std::string::npos) << refusal.ToString();
  EXPECT_EQ(refused.step(), 0u);

  // The winner's step: its values on its own gradient.
  ReferenceGroupAdamW reference(init);
  reference.Step(winner, ToDouble(winner_grads));
  EXPECT_LT(MaxRelativeError(winner_params, reference.params()), 1e-5);
  EXPECT_EQ(ServerCounter(cluster.server(0), "loco_server_push_withdrawals_total"), 1);
  EXPECT_EQ(ServerCounter(cluster.server(0), "loco_server_pushes_total"), 1);

  // Agreeing now, the refused worker's push of step 0 finds it applied: it
  // resynchronises to version 1, the winner's parameters.
  ASSERT_TRUE(refused.SetStepHyper(winner).ok());
  StatusOr<StepResult> r = refused.Step(refused_grads, &refused_params);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->resynced);
  EXPECT_EQ(refused_params, winner_params);

  // Step 1 takes both gradients.
  const std::vector<float> ga1 = Uniform(kElements, 310, -0.5f, 0.5f);
  const std::vector<float> gb1 = Uniform(kElements, 311, -0.5f, 0.5f);
  step_a = std::async(std::launch::async, [&] { return a->Step(ga1, &two.pa); });
  r = b->Step(gb1, &two.pb);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  r = step_a.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(a->step(), 2u);
  EXPECT_EQ(b->step(), 2u);
  EXPECT_EQ(two.pa, two.pb);
  std::vector<double> mean(kElements);
  for (size_t i = 0; i < kElements; ++i) mean[i] = (double{ga1[i]} + gb1[i]) / 2;
  reference.Step(winner, mean);
  EXPECT_LT(MaxRelativeError(two.pa, reference.params()), 1e-5);
  EXPECT_TRUE(a->Leave().ok());
  EXPECT_TRUE(b->Leave().ok());
}

// The wire bytes `w` has pushed to shard `shard` (its metrics).
double PushedTo(const Worker& w, uint32_t shard) {
  for (const prometheus::MetricFamily& family : w.metrics_registry()->Collect()) {
    if (family.name != "loco_worker_wire_bytes_total") continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      bool this_shard = false, push = false;
      for (const prometheus::ClientMetric::Label& l : m.label) {
        this_shard = this_shard || (l.name == "shard" && l.value == std::to_string(shard));
        push = push || (l.name == "direction" && l.value == "push");
      }
      if (this_shard && push) return m.counter.value;
    }
  }
  return 0;
}

// Two workers disagree and each wins one shard: A's values reach shard 1
// first, B's shard 0. Each Step is refused by one shard, and its pull from
// the other waits for a push that shard refused from the other worker; the
// refusal ends the step at once (client/step_abort.h), so both fail with
// INVALID_ARGUMENT in seconds instead of waiting until step_timeout_ms.
// Each withdraws from the shard that refused it, so the step completes on
// both shards (each with its winner's push) instead of staying open.
TEST(WorkerStepHyperTest, WorkersThatEachWinOneShardBothFailAtOnce) {
  Cluster cluster;  // two shards: [0, 512) and [512, 1000)
  WorkerOptions o = cluster.Options(PushCodec::kFp32);
  o.step_timeout_ms = 30000;
  TwoWorkers two = JoinTwo(o, Uniform(kElements, 12, -1, 1));
  ASSERT_NE(two.b, nullptr);
  std::unique_ptr<Worker>& a = two.a;
  std::unique_ptr<Worker>& b = two.b;
  std::vector<float>& pa = two.pa;
  std::vector<float>& pb = two.pb;
  ASSERT_TRUE(a->SetStepHyper(std::vector<HyperGroup>{{0, kElements, 1e-2, 0.9, 0.999, 1e-8, 0}})
                  .ok());
  ASSERT_TRUE(b->SetStepHyper(std::vector<HyperGroup>{{0, kElements, 2e-2, 0.9, 0.999, 1e-8, 0}})
                  .ok());
  const std::vector<float> ga = Uniform(kElements, 302, -0.5f, 0.5f);
  const std::vector<float> gb = Uniform(kElements, 303, -0.5f, 0.5f);
  std::vector<float> grads_a(kElements);

  // A's gradient becomes final in two halves: shard 1's first (pushed at
  // once, fixing A's values there), shard 0's only after B's step ended.
  std::promise<void> b_ended;
  std::shared_future<void> b_ended_future = b_ended.get_future().share();
  const double pushed_before = PushedTo(*a, 1);
  auto step_a = std::async(std::launch::async, [&] {
    return a->Step(
        [&](const GradientReady& ready) {
          std::copy(ga.begin() + kShardOffset[1], ga.end(), grads_a.begin() + kShardOffset[1]);
          ready(kShardOffset[1]);
          if (b_ended_future.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
            return Aborted("B's step never ended");
          }
          std::copy(ga.begin(), ga.begin() + kShardOffset[1], grads_a.begin());
          return Status::Ok();
        },
        grads_a, &pa);
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (PushedTo(*a, 1) == pushed_before && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(PushedTo(*a, 1), pushed_before) << "A's shard 1 was never pushed";

  const auto b_started = std::chrono::steady_clock::now();
  StatusOr<StepResult> rb = b->Step(gb, &pb);  // refused by shard 1; wins shard 0
  const double b_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - b_started).count();
  b_ended.set_value();
  const auto a_released = std::chrono::steady_clock::now();
  StatusOr<StepResult> ra = step_a.get();  // refused by shard 0
  const double a_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - a_released).count();

  for (const auto& [who, r] : {std::pair{"A", &ra}, std::pair{"B", &rb}}) {
    ASSERT_FALSE(r->ok()) << who << "'s step completed with values that disagree";
    EXPECT_EQ(r->status().code(), StatusCode::kInvalidArgument) << who << ": "
                                                                << r->status().ToString();
    EXPECT_NE(r->status().message().find("lr"), std::string::npos) << r->status().ToString();
  }
  // Far below step_timeout_ms (30 s): the refusal ended each step.
  EXPECT_LT(b_seconds, 10.0);
  EXPECT_LT(a_seconds, 10.0);
  EXPECT_EQ(a->step(), 0u);
  EXPECT_EQ(b->step(), 0u);
  for (uint32_t k = 0; k < 2; ++k) {
    EXPECT_EQ(ServerCounter(cluster.server(k), "loco_server_push_withdrawals_total"), 1)
        << "shard " << k;
    EXPECT_EQ(ServerCounter(cluster.server(k), "loco_server_steps_completed_total"), 1)
        << "shard " << k;
  }
  EXPECT_TRUE(a->Leave().ok());
  EXPECT_TRUE(b->Leave().ok());
}

}  // namespace
}  // namespace loco

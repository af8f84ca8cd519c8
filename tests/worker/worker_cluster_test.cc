// loco::Worker against real in-process servers on loopback: one coordinator,
// two parameter-server shards (fp32 return path, AdamW lr 1e-3).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <prometheus/metric_family.h>
#include "kernels/device.h"
#include "kernels/loco_compress.h"
#include "kernels/quantize.h"
#include "server/coordinator_server.h"
#include "server/parameter_server.h"
#include "tests/worker/random_batch.h"
#include "worker/worker.h"

namespace loco {
namespace {

constexpr size_t kElements = 1000;
constexpr uint32_t kShards = 2;
constexpr uint32_t kAlign = 128;
// MakeShardMap's closed form for 1000 elements, 2 shards, align 128:
// ceil(1000/128) = 8 aligned blocks, 4 per shard.
constexpr size_t kShardOffset[kShards] = {0, 512};
constexpr size_t kShardLength[kShards] = {512, 488};

class Cluster {
 public:
  Cluster() {
    CoordinatorServerOptions co;
    co.security = TransportSecurityOptions::Insecure();  // loopback
    co.coordinator.membership.num_shards = kShards;
    co.coordinator.membership.shard_align = kAlign;
    co.coordinator.membership.heartbeat_timeout = std::chrono::milliseconds(20000);
    co.coordinator.heartbeat_interval = std::chrono::milliseconds(200);
    coordinator_ = std::make_unique<CoordinatorServer>(co);
    auto port = coordinator_->Start();
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    for (uint32_t k = 0; k < kShards; ++k) {
      ParameterServerOptions po;
      po.security = TransportSecurityOptions::Insecure();
      po.coordinator = coordinator_->address();
      po.num_servers = kShards;
      po.shard.shard_id = k;
      po.shard.hyper.lr = 1e-3f;
      po.shard.return_path.codec = PullCodec::kFp32;
      servers_.push_back(std::make_unique<ParameterServer>(po));
      auto p = servers_.back()->Start();
      EXPECT_TRUE(p.ok()) << p.status().ToString();
    }
  }
  ~Cluster() {
    for (auto& s : servers_) s->Shutdown(std::chrono::milliseconds(500));
    coordinator_->Shutdown(std::chrono::milliseconds(500));
  }

  WorkerOptions Options(const std::string& codec) const {
    WorkerOptions o;
    o.security = TransportSecurityOptions::Insecure();
    o.coordinator = coordinator_->address();
    o.name = "test-" + codec;
    o.codec = codec;
    o.block_size = kAlign;  // the shards' alignment, so that blocks never straddle them
    o.rpc_timeout_ms = 5000;
    o.pull_wait_ms = 2000;
    o.step_timeout_ms = 20000;
    o.join_timeout_ms = 20000;
    o.max_retries = 3;
    return o;
  }
  ParameterServer& server(uint32_t k) { return *servers_[k]; }

 private:
  std::unique_ptr<CoordinatorServer> coordinator_;
  std::vector<std::unique_ptr<ParameterServer>> servers_;
};

// Plain AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, no weight decay) in double.
struct ReferenceAdam {
  explicit ReferenceAdam(const std::vector<float>& init)
      : p(init.begin(), init.end()), m(init.size()), v(init.size()) {}
  void Step(const std::vector<double>& g) {
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
      const double mh = m[i] / (1 - std::pow(0.9, t)), vh = v[i] / (1 - std::pow(0.999, t));
      p[i] -= 1e-3 * mh / (std::sqrt(vh) + 1e-8);
    }
  }
  std::vector<double> p, m, v;
  int t = 0;
};

std::unique_ptr<Worker> JoinedWorker(const WorkerOptions& o) {
  auto w = Worker::Connect(o);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return nullptr;
  Status s = (*w)->Join(kElements);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::move(w).value();
}

TEST(WorkerClusterTest, Fp32StepsMatchPlainAdamWAndLateJoinerGetsCurrentVersion) {
  Cluster cluster;
  // Unary pushes here; every other test pushes in chunks (the default).
  WorkerOptions unary = cluster.Options("fp32");
  unary.push_chunk_bytes = 0;
  std::unique_ptr<Worker> w = JoinedWorker(unary);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->world_size(), 1u);
  EXPECT_EQ(w->rank(), 0u);
  const std::vector<float> init = Uniform(kElements, 1, -1, 1);
  const std::vector<float> target = Uniform(kElements, 2, -1, 1);
  std::vector<float> params;
  ASSERT_TRUE(w->InitParameters(init, &params).ok());
  EXPECT_EQ(params, init);
  EXPECT_EQ(w->step(), 0u);

  ReferenceAdam ref(init);
  for (uint64_t t = 0; t < 5; ++t) {
    // Gradient of 0.5·|p − target|², evaluated at the reference point.
    std::vector<float> g(kElements);
    std::vector<double> gd(kElements);
    for (size_t i = 0; i < kElements; ++i) {
      g[i] = static_cast<float>(ref.p[i] - target[i]);
      gd[i] = g[i];
    }
    ref.Step(gd);
    auto r = w->Step(g, &params);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->step, t);
    EXPECT_FALSE(r->resynced);
    EXPECT_EQ(r->push_wire_bytes, 4 * kElements);
    EXPECT_EQ(r->pull_wire_bytes, 4 * kElements);
    EXPECT_EQ(w->step(), t + 1);
  }
  for (size_t i = 0; i < kElements; ++i) ASSERT_NEAR(params[i], ref.p[i], 1e-5) << i;

  const TrafficStats tr = w->traffic();
  EXPECT_EQ(tr.push_wire_bytes, 5 * 4 * kElements);
  EXPECT_EQ(tr.push_fp32_bytes, 5 * 4 * kElements);
  EXPECT_EQ(tr.pull_wire_bytes, 6 * 4 * kElements);  // initial copy + 5 steps
  EXPECT_EQ(tr.steps, 5u);
  EXPECT_EQ(tr.resyncs, 0u);

  // A late joiner offers other parameters (first writer wins: ignored) and
  // receives version 5.
  std::unique_ptr<Worker> late = JoinedWorker(cluster.Options("fp32"));
  ASSERT_NE(late, nullptr);
  std::vector<float> late_params;
  ASSERT_TRUE(late->InitParameters(target, &late_params).ok());
  EXPECT_EQ(late->step(), 5u);
  EXPECT_EQ(late_params, params);
  EXPECT_TRUE(late->Leave().ok());
  EXPECT_TRUE(late->Leave().ok());  // idempotent
  EXPECT_TRUE(w->Leave().ok());
}

TEST(WorkerClusterTest, LocoPushesExpectedPayloadsAndMatchesKernelReference) {
  Cluster cluster;
  const WorkerOptions o = cluster.Options("loco");
  std::unique_ptr<Worker> w = JoinedWorker(o);
  ASSERT_NE(w, nullptr);
  const std::vector<float> init = Uniform(kElements, 3, -1, 1);
  std::vector<float> params;
  ASSERT_TRUE(w->InitParameters(init, &params).ok());

  // Reference: per shard, an independent LoCo error state compressing the
  // same gradients; the server sees D(q, s) and runs AdamW.
  std::vector<ErrorState> states;
  for (uint32_t k = 0; k < kShards; ++k) states.emplace_back(kShardLength[k], 128, 8);
  ReferenceAdam ref(init);
  size_t wire_per_step = 0;
  for (uint32_t k = 0; k < kShards; ++k) {
    wire_per_step += PackedBytes(kShardLength[k], 4) + 4 * NumBlocks(kShardLength[k], 128);
  }
  const int steps = 3;
  for (int t = 0; t < steps; ++t) {
    const std::vector<float> g = Uniform(kElements, 100 + t, -0.1f, 0.1f);
    std::vector<double> decoded(kElements);
    for (uint32_t k = 0; k < kShards; ++k) {
      LocoParams lp;
      lp.beta = o.beta;
      lp.reset_period = o.reset_period;
      lp.index_offset = kShardOffset[k];
      std::vector<uint8_t> codes(PackedBytes(kShardLength[k], 4));
      std::vector<float> scales(NumBlocks(kShardLength[k], 128)), d(kShardLength[k]);
      LocoStats ls;
      ASSERT_TRUE(cpu::LocoCompress(g.data() + kShardOffset[k], kShardLength[k], t, lp,
                                    states[k].view(), codes.data(), scales.data(), &ls).ok());
      ASSERT_TRUE(cpu::Dequantize(codes.data(), scales.data(), kShardLength[k], 4, 128,
                                  d.data()).ok());
      for (size_t i = 0; i < kShardLength[k]; ++i) decoded[kShardOffset[k] + i] = d[i];
    }
    ref.Step(decoded);
    auto r = w->Step(g, &params);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->push_wire_bytes, wire_per_step);
    EXPECT_EQ(r->push_fp32_bytes, 4 * kElements);
    EXPECT_GT(r->error_sq_norm, 0.0);
  }
  for (size_t i = 0; i < kElements; ++i) ASSERT_NEAR(params[i], ref.p[i], 1e-5) << i;
  const TrafficStats tr = w->traffic();
  EXPECT_EQ(tr.push_wire_bytes, steps * wire_per_step);
  EXPECT_EQ(tr.push_fp32_bytes, steps * 4 * kElements);
  // 4-bit codes plus one fp32 scale per 128 elements: about 7.5x less than fp32.
  EXPECT_LT(static_cast<double>(tr.push_wire_bytes), tr.push_fp32_bytes / 7.0);
  EXPECT_TRUE(w->Leave().ok());
}

// loco_server_pulls_total of `server`, read from its registry.
double PullsServed(ParameterServer& server) {
  for (const prometheus::MetricFamily& family : server.metrics_registry().Collect()) {
    if (family.name != "loco_server_pulls_total") continue;
    double sum = 0;
    for (const prometheus::ClientMetric& m : family.metric) sum += m.counter.value;
    return sum;
  }
  return -1;
}

// Step(compute, ...) with a gradient that becomes final suffix first, as a
// backward pass makes it: shard 1 is pushed (and its step applied) while the
// part of shard 0 is still being computed, no pull touches the parameters
// before the computation ends, and the parameters equal those of plain
// steps on another cluster, bit for bit.
TEST(WorkerClusterTest, OverlappedStepPushesEachShardWhenFinalAndEqualsPlainSteps) {
  Cluster plain_cluster, overlap_cluster;
  std::unique_ptr<Worker> plain = JoinedWorker(plain_cluster.Options("loco"));
  std::unique_ptr<Worker> overlapped = JoinedWorker(overlap_cluster.Options("loco"));
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(overlapped, nullptr);
  const std::vector<float> init = Uniform(kElements, 21, -1, 1);
  std::vector<float> p_plain, p_overlap;
  ASSERT_TRUE(plain->InitParameters(init, &p_plain).ok());
  ASSERT_TRUE(overlapped->InitParameters(init, &p_overlap).ok());
  const auto version = [&](uint32_t k) {
    return overlap_cluster.server(k).service().Snapshot().version();
  };

  std::vector<float> buffer(kElements);
  for (uint64_t t = 0; t < 3; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    const std::vector<float> g = Uniform(kElements, 300 + t, -0.1f, 0.1f);
    auto r_plain = plain->Step(g, &p_plain);
    ASSERT_TRUE(r_plain.ok()) << r_plain.status().ToString();

    std::fill(buffer.begin(), buffer.end(), std::numeric_limits<float>::quiet_NaN());
    const std::vector<float> before = p_overlap;
    bool shard1_applied_early = false, shard1_pulled_early = false, shard0_waited = false,
         params_untouched = false;
    auto r = overlapped->Step(
        [&](const GradientReady& ready) -> Status {
          const double pulls_before = PullsServed(overlap_cluster.server(1));
          std::copy(g.begin() + kShardOffset[1], g.end(), buffer.begin() + kShardOffset[1]);
          ready(kShardOffset[1]);
          // The only worker: shard 1's step completes on its push alone.
          const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
          while (version(1) == t && std::chrono::steady_clock::now() < limit) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
          }
          shard1_applied_early = version(1) == t + 1;
          // Its answer crosses the link while this computation still runs.
          while (PullsServed(overlap_cluster.server(1)) == pulls_before &&
                 std::chrono::steady_clock::now() < limit) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
          }
          shard1_pulled_early = PullsServed(overlap_cluster.server(1)) == pulls_before + 1;
          shard0_waited = version(0) == t;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          params_untouched = p_overlap == before;  // the pull waits for this to return
          std::copy(g.begin(), g.begin() + kShardOffset[1], buffer.begin());
          ready(0);
          return Status::Ok();
        },
        buffer, &p_overlap);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(shard1_applied_early);
    EXPECT_TRUE(shard1_pulled_early);
    EXPECT_TRUE(shard0_waited);
    EXPECT_TRUE(params_untouched);
    EXPECT_EQ(r->push_wire_bytes, r_plain->push_wire_bytes);
  }
  ASSERT_EQ(p_overlap.size(), p_plain.size());
  EXPECT_EQ(std::memcmp(p_overlap.data(), p_plain.data(), p_plain.size() * sizeof(float)), 0);

  // A computation that fails fails the step with its status.
  auto failed = overlapped->Step(
      [&](const GradientReady&) -> Status { return Internal("no gradient"); }, buffer,
      &p_overlap);
  EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
  EXPECT_EQ(version(0), 3u);
  EXPECT_EQ(version(1), 3u);
  EXPECT_TRUE(plain->Leave().ok());
  EXPECT_TRUE(overlapped->Leave().ok());
}

// {sample count, sum} of the worker's histogram `name`, of the series whose
// labels include `label` = `value` (any series when `label` is empty).
std::pair<uint64_t, double> HistogramOf(const Worker& w, const std::string& name,
                                        const std::string& label = "",
                                        const std::string& value = "") {
  for (const prometheus::MetricFamily& family : w.metrics_registry()->Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      const bool match = label.empty() || std::any_of(m.label.begin(), m.label.end(),
                                                      [&](const prometheus::ClientMetric::Label& l) {
                                                        return l.name == label && l.value == value;
                                                      });
      if (match) return {m.histogram.sample_count, m.histogram.sample_sum};
    }
  }
  return {0, -1};
}

// loco_worker_step_phase_seconds splits each step where its gradient
// computation ends: steps whose computation sleeps 40 ms put those 40 ms in
// "compute", plain steps (the gradient given) almost nothing, and the two
// phases add up to loco_worker_step_duration_seconds.
TEST(WorkerClusterTest, StepPhasesSplitEachStepWhereItsComputationEnds) {
  Cluster c;
  std::unique_ptr<Worker> w = JoinedWorker(c.Options("loco"));
  ASSERT_NE(w, nullptr);
  std::vector<float> params;
  ASSERT_TRUE(w->InitParameters(Uniform(kElements, 5, -1, 1), &params).ok());
  const std::vector<float> g = Uniform(kElements, 6, -0.1f, 0.1f);
  std::vector<float> buffer(kElements);
  constexpr int kSlowSteps = 3, kPlainSteps = 2;
  constexpr double kSleep = 0.04;
  for (int t = 0; t < kSlowSteps; ++t) {
    auto r = w->Step(
        [&](const GradientReady& ready) -> Status {
          std::this_thread::sleep_for(std::chrono::duration<double>(kSleep));
          buffer = g;
          ready(0);
          return Status::Ok();
        },
        buffer, &params);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    // The step's own account, which worker_main prints in its step events.
    EXPECT_GE(r->compute_seconds, kSleep);
    EXPECT_GT(r->seconds, r->compute_seconds);
  }
  const auto [slow_count, slow_compute] =
      HistogramOf(*w, "loco_worker_step_phase_seconds", "phase", "compute");
  ASSERT_EQ(slow_count, uint64_t{kSlowSteps});
  EXPECT_GE(slow_compute, kSlowSteps * kSleep);
  for (int t = 0; t < kPlainSteps; ++t) ASSERT_TRUE(w->Step(g, &params).ok());

  const auto [count, compute] =
      HistogramOf(*w, "loco_worker_step_phase_seconds", "phase", "compute");
  const auto [exposed_count, exposed] =
      HistogramOf(*w, "loco_worker_step_phase_seconds", "phase", "exposed_communication");
  const auto [step_count, step] = HistogramOf(*w, "loco_worker_step_duration_seconds");
  EXPECT_EQ(count, uint64_t{kSlowSteps + kPlainSteps});
  EXPECT_EQ(exposed_count, count);
  EXPECT_EQ(step_count, count);
  // The plain steps' computation is a call that returns at once.
  EXPECT_LT(compute - slow_compute, kPlainSteps * 0.005);
  // Every step pushed and pulled after its computation: each took some time.
  EXPECT_GT(exposed, 0.0);
  EXPECT_NEAR(compute + exposed, step, 1e-6 * (kSlowSteps + kPlainSteps));
  EXPECT_TRUE(w->Leave().ok());
}

// Gradients on a CUDA device need a device (and a CUDA build): without one,
// Join fails saying so and leaves, so the cluster does not wait for it.
TEST(WorkerClusterTest, DeviceGradientsWithoutADeviceFailJoinAndLeave) {
  if (cuda::DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  Cluster cluster;
  WorkerOptions o = cluster.Options("loco");
  o.gradient_device = 0;
  auto w = Worker::Connect(o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const Status joined = (*w)->Join(kElements);
  EXPECT_FALSE(joined.ok());
  EXPECT_TRUE(joined.code() == StatusCode::kUnavailable ||
              joined.code() == StatusCode::kUnimplemented)
      << joined.ToString();
  EXPECT_NE(joined.message().find("CUDA"), std::string::npos) << joined.ToString();
  std::unique_ptr<Worker> host = JoinedWorker(cluster.Options("loco"));
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->world_size(), 1u);
  o.gradient_device = -2;
  EXPECT_FALSE(Worker::Connect(o).ok());
}

// A join whose cluster never became ready (no server yet) leaves the
// cluster again, and the same Worker joins once the server is up: the
// coordinator then counts one worker, not a stale one beside it.
TEST(WorkerClusterTest, FailedJoinLeavesAndTheSameWorkerJoinsAgain) {
  CoordinatorServerOptions co;
  co.security = TransportSecurityOptions::Insecure();  // loopback
  co.coordinator.membership.num_shards = 1;
  co.coordinator.membership.shard_align = kAlign;
  co.coordinator.membership.heartbeat_timeout = std::chrono::milliseconds(20000);
  CoordinatorServer coordinator(co);
  ASSERT_TRUE(coordinator.Start().ok());

  WorkerOptions o;
  o.security = TransportSecurityOptions::Insecure();
  o.coordinator = coordinator.address();
  o.codec = "fp32";
  o.block_size = kAlign;
  o.rpc_timeout_ms = 5000;
  o.join_timeout_ms = 300;  // the view cannot be ready: no server registered
  o.max_retries = 1;
  auto w = Worker::Connect(o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const Status first = (*w)->Join(kElements);
  ASSERT_EQ(first.code(), StatusCode::kDeadlineExceeded) << first.ToString();
  EXPECT_EQ((*w)->worker_id(), 0u);

  ParameterServerOptions po;
  po.security = TransportSecurityOptions::Insecure();
  po.coordinator = coordinator.address();
  po.num_servers = 1;
  po.shard.shard_id = 0;
  po.shard.return_path.codec = PullCodec::kFp32;
  ParameterServer server(po);
  ASSERT_TRUE(server.Start().ok());
  // The same Worker, with the time to see the server register.
  Status again = Status::Ok();
  for (int attempt = 0; attempt < 20; ++attempt) {
    again = (*w)->Join(kElements);
    if (again.code() != StatusCode::kDeadlineExceeded) break;
  }
  ASSERT_TRUE(again.ok()) << again.ToString();
  EXPECT_NE((*w)->worker_id(), 0u);
  EXPECT_EQ((*w)->world_size(), 1u) << "the failed join is still a member";
  std::vector<float> params;
  ASSERT_TRUE((*w)->InitParameters(Uniform(kElements, 4, -1, 1), &params).ok());
  ASSERT_TRUE((*w)->Step(Uniform(kElements, 5, -1, 1), &params).ok());
  EXPECT_EQ(server.service().Snapshot().version(), 1u);
  EXPECT_TRUE((*w)->Leave().ok());
  server.Shutdown(std::chrono::milliseconds(500));
  coordinator.Shutdown(std::chrono::milliseconds(500));
}

TEST(WorkerClusterTest, TwoWorkersStepTogetherOnTheMeanGradient) {
  Cluster cluster;
  std::unique_ptr<Worker> a = JoinedWorker(cluster.Options("fp32"));
  std::unique_ptr<Worker> b = JoinedWorker(cluster.Options("fp32"));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::vector<float> init = Uniform(kElements, 5, -1, 1);
  const std::vector<float> ta = Uniform(kElements, 6, -1, 1), tb = Uniform(kElements, 7, -1, 1);
  std::vector<float> pa, pb;
  ASSERT_TRUE(a->InitParameters(init, &pa).ok());
  ASSERT_TRUE(b->InitParameters(init, &pb).ok());
  const int steps = 4;
  ReferenceAdam ref(init);
  std::vector<std::vector<float>> ga(steps), gb(steps);
  for (int t = 0; t < steps; ++t) {
    std::vector<double> mean(kElements);
    ga[t].resize(kElements);
    gb[t].resize(kElements);
    for (size_t i = 0; i < kElements; ++i) {
      ga[t][i] = static_cast<float>(ref.p[i] - ta[i]);
      gb[t][i] = static_cast<float>(ref.p[i] - tb[i]);
      mean[i] = (static_cast<double>(ga[t][i]) + gb[t][i]) / 2;
    }
    ref.Step(mean);
  }
  Status sb;
  std::thread tb_thread([&] {
    for (int t = 0; t < steps && sb.ok(); ++t) {
      auto r = b->Step(gb[t], &pb);
      if (!r.ok()) sb = r.status();
    }
  });
  Status sa;
  for (int t = 0; t < steps && sa.ok(); ++t) {
    auto r = a->Step(ga[t], &pa);
    if (!r.ok()) sa = r.status();
  }
  tb_thread.join();
  ASSERT_TRUE(sa.ok()) << sa.ToString();
  ASSERT_TRUE(sb.ok()) << sb.ToString();
  EXPECT_EQ(a->step(), static_cast<uint64_t>(steps));
  EXPECT_EQ(b->step(), static_cast<uint64_t>(steps));
  EXPECT_EQ(pa, pb);
  for (size_t i = 0; i < kElements; ++i) ASSERT_NEAR(pa[i], ref.p[i], 1e-5) << i;
  // `a` joined first; it learns the new world size from its heartbeats
  // (every 200 ms here). Bounded wait: at most 50 × 100 ms.
  for (int i = 0; i < 50 && a->world_size() != 2u; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(a->world_size(), 2u);
  EXPECT_EQ(b->world_size(), 2u);
  EXPECT_NE(a->rank(), b->rank());
}

// A worker that joins while a step is open is not its participant: its push
// is refused (not a participant, or already applied when the step completed
// first), it drops the gradient, waits for the step to complete and takes
// part from the next one. With `give_joiner_a_head_start` the joiner's push
// most likely reaches the open step first (the "not a participant" path);
// either order must end the same way.
class JoinerTest : public ::testing::TestWithParam<bool> {};

TEST_P(JoinerTest, JoinerExcludedFromOpenStepResynchronises) {
  Cluster cluster;
  std::unique_ptr<Worker> w1 = JoinedWorker(cluster.Options("fp32"));
  std::unique_ptr<Worker> w2 = JoinedWorker(cluster.Options("fp32"));
  ASSERT_NE(w1, nullptr);
  ASSERT_NE(w2, nullptr);
  const std::vector<float> init = Uniform(kElements, 8, -1, 1);
  std::vector<float> p1, p2, p3;
  ASSERT_TRUE(w1->InitParameters(init, &p1).ok());
  ASSERT_TRUE(w2->InitParameters(init, &p2).ok());
  const std::vector<float> g = Uniform(kElements, 9, -1, 1);

  StatusOr<StepResult> r1 = Status(StatusCode::kInternal, "not run");
  std::thread t1([&] { r1 = w1->Step(g, &p1); });
  // Step 0 opens with participants {w1, w2} once w1's push arrived (bounded wait).
  for (int i = 0; i < 100 && cluster.server(0).service().pending_pushes() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(cluster.server(0).service().pending_pushes(), 1u);

  std::unique_ptr<Worker> w3 = JoinedWorker(cluster.Options("fp32"));
  ASSERT_NE(w3, nullptr);
  ASSERT_TRUE(w3->InitParameters(init, &p3).ok());
  EXPECT_EQ(w3->step(), 0u);
  StatusOr<StepResult> r3 = Status(StatusCode::kInternal, "not run");
  std::thread t3([&] { r3 = w3->Step(g, &p3); });
  if (GetParam()) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto r2 = w2->Step(g, &p2);
  t1.join();
  t3.join();
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  ASSERT_TRUE(r3.ok()) << r3.status().ToString();
  EXPECT_FALSE(r1->resynced);
  EXPECT_FALSE(r2->resynced);
  EXPECT_TRUE(r3->resynced);
  EXPECT_EQ(r3->push_wire_bytes, 0u);  // the refused push is not counted
  EXPECT_EQ(w3->traffic().resyncs, 1u);
  EXPECT_EQ(w1->step(), 1u);
  EXPECT_EQ(w3->step(), 1u);
  EXPECT_EQ(p3, p1);
  EXPECT_EQ(p2, p1);

  // Step 1 includes all three.
  std::vector<std::thread> threads;
  std::vector<Status> st(3);
  Worker* ws[3] = {w1.get(), w2.get(), w3.get()};
  std::vector<float>* ps[3] = {&p1, &p2, &p3};
  for (int k = 0; k < 3; ++k) {
    threads.emplace_back([&, k] {
      auto r = ws[k]->Step(g, ps[k]);
      st[k] = r.ok() ? (r->resynced ? Status(StatusCode::kAborted, "resynced") : Status::Ok())
                     : r.status();
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(st[k].ok()) << k << ": " << st[k].ToString();
  EXPECT_EQ(w3->step(), 2u);
  EXPECT_EQ(p3, p1);
}

INSTANTIATE_TEST_SUITE_P(WorkerClusterTest, JoinerTest, ::testing::Bool());

TEST(WorkerClusterTest, ConnectAndJoinValidateInput) {
  WorkerOptions o;
  o.security = TransportSecurityOptions::Insecure();  // so that each refusal below is for its own field
  o.coordinator = "nowhere";
  EXPECT_EQ(Worker::Connect(o).status().code(), StatusCode::kInvalidArgument);
  o.coordinator = "127.0.0.1:1";
  o.codec = "int3";
  EXPECT_EQ(Worker::Connect(o).status().code(), StatusCode::kInvalidArgument);
  o.codec = "loco";
  o.block_size = 100;
  EXPECT_EQ(Worker::Connect(o).status().code(), StatusCode::kInvalidArgument);
  o.block_size = 128;
  for (const size_t chunk : {size_t{1}, size_t{4095}, (size_t{64} << 20) + 1}) {
    o.push_chunk_bytes = chunk;
    const Status refused = Worker::Connect(o).status();
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << chunk;
    EXPECT_NE(refused.message().find("push_chunk_bytes"), std::string::npos) << refused.ToString();
  }
  o.push_chunk_bytes = 0;
  EXPECT_TRUE(ValidateWorkerOptions(o).ok());
  o.block_size = 100;

  Cluster cluster;
  WorkerOptions bad_block = cluster.Options("loco");
  bad_block.block_size = 256;  // does not divide the shard alignment of 128
  auto first = JoinedWorker(cluster.Options("fp32"));
  ASSERT_NE(first, nullptr);
  auto w = Worker::Connect(bad_block);
  ASSERT_TRUE(w.ok());
  Status s = (*w)->Join(kElements);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  auto other_size = Worker::Connect(cluster.Options("fp32"));
  ASSERT_TRUE(other_size.ok());
  EXPECT_FALSE((*other_size)->Join(kElements + 1).ok());
  std::vector<float> params;
  auto r = (*other_size)->Step(std::vector<float>(kElements), &params);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
}

// WaitForClusterStep (loco-worker --join-at-step) reads the cluster's step
// from outside the membership: it times out while no one trains, returns
// once the step is reached, and never joins.
TEST(WorkerClusterTest, WaitForClusterStepWaitsForTheStepWithoutJoining) {
  Cluster cluster;
  auto watcher = Worker::Connect(cluster.Options("loco"));
  ASSERT_TRUE(watcher.ok()) << watcher.status().ToString();
  auto soon = [](int ms) {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  };
  // No worker has fixed the model size yet: the view is not ready.
  auto early = (*watcher)->WaitForClusterStep(1, soon(200));
  EXPECT_EQ(early.status().code(), StatusCode::kDeadlineExceeded) << early.status().ToString();

  std::unique_ptr<Worker> w = JoinedWorker(cluster.Options("fp32"));
  ASSERT_NE(w, nullptr);
  std::vector<float> params;
  ASSERT_TRUE(w->InitParameters(Uniform(kElements, 1, -1, 1), &params).ok());
  constexpr uint64_t kWaitFor = 5, kSteps = 8;
  StatusOr<uint64_t> seen = DeadlineExceeded("not run");
  std::thread waiting([&] { seen = (*watcher)->WaitForClusterStep(kWaitFor, soon(20000)); });
  const std::vector<float> g = Uniform(kElements, 2, -1, 1);
  for (uint64_t t = 0; t < kSteps; ++t) {
    auto r = w->Step(g, &params);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  waiting.join();
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_GE(*seen, kWaitFor);
  EXPECT_LE(*seen, kSteps);
  // Training is at kSteps now: a later step is not reached, and the message
  // says where the cluster is.
  auto later = (*watcher)->WaitForClusterStep(kSteps + 1, soon(200));
  EXPECT_EQ(later.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(later.status().message().find("last seen: step " + std::to_string(kSteps)),
            std::string::npos)
      << later.status().ToString();
  EXPECT_EQ((*watcher)->worker_id(), 0u) << "waiting must not join";
  EXPECT_EQ(w->world_size(), 1u);
}

}  // namespace
}  // namespace loco

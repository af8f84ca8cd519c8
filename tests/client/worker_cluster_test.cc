// loco::Worker stepping against real in-process servers on loopback
// (tests/client/worker_cluster.h): fp32 and LoCo steps against plain AdamW
// and the kernels, overlapped pushes, step phases, two workers together.
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
#include "server/coordinator/coordinator_server.h"
#include "server/parameter_server.h"
#include "tests/common/random_batch.h"
#include "tests/client/worker_cluster.h"
#include "client/worker.h"

namespace loco {
namespace {

using namespace cluster_fixture;  // NOLINT: the fixture of every test here

TEST(WorkerClusterTest, Fp32StepsMatchPlainAdamWAndLateJoinerGetsCurrentVersion) {
  Cluster cluster;
  // Unary pushes here; every other test pushes in chunks (the default).
  WorkerOptions unary = cluster.Options(PushCodec::kFp32);
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
  std::unique_ptr<Worker> late = JoinedWorker(cluster.Options(PushCodec::kFp32));
  ASSERT_NE(late, nullptr);
  std::vector<float> late_params;
  ASSERT_TRUE(late->InitParameters(target, &late_params).ok());
  EXPECT_EQ(late->step(), 5u);
  EXPECT_EQ(late_params, params);
  EXPECT_TRUE(late->Leave().ok());
  EXPECT_TRUE(late->Leave().ok());  // idempotent
  EXPECT_TRUE(w->Leave().ok());
}

// Ranks other than 0 wait for rank 0's initial parameters instead of
// sending theirs too (W full copies would cost each server W shard-sized
// buffers): rank 1's InitParameters, started 6 s before rank 0's (past the
// fixed 5 s wait this replaced), ends with rank 0's values, not its own.
TEST(WorkerClusterTest, OtherRanksWaitForRankZerosInitialParameters) {
  Cluster cluster;
  std::unique_ptr<Worker> first = JoinedWorker(cluster.Options(PushCodec::kFp32));
  std::unique_ptr<Worker> second = JoinedWorker(cluster.Options(PushCodec::kFp32));
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ASSERT_EQ(first->rank(), 0u);
  ASSERT_EQ(second->rank(), 1u);
  const std::vector<float> rank0_values = Uniform(kElements, 5, -1, 1);
  const std::vector<float> rank1_values = Uniform(kElements, 6, -1, 1);
  std::vector<float> second_params;
  Status second_init;
  std::thread waiting([&] { second_init = second->InitParameters(rank1_values, &second_params); });
  std::this_thread::sleep_for(std::chrono::seconds(6));
  std::vector<float> first_params;
  const Status first_init = first->InitParameters(rank0_values, &first_params);
  waiting.join();
  ASSERT_TRUE(first_init.ok()) << first_init.ToString();
  ASSERT_TRUE(second_init.ok()) << second_init.ToString();
  EXPECT_EQ(first_params, rank0_values);
  EXPECT_EQ(second_params, rank0_values) << "rank 1 offered its own copy";
  EXPECT_TRUE(second->Leave().ok());
  EXPECT_TRUE(first->Leave().ok());
}

// When rank 0 leaves before offering, the heartbeat makes the waiting
// worker rank 0, and it offers its own parameters at once (well inside
// InitShardTimeout, 20 s here).
TEST(WorkerClusterTest, AWaitingRankOffersOnceItBecomesRankZero) {
  Cluster cluster;
  std::unique_ptr<Worker> first = JoinedWorker(cluster.Options(PushCodec::kFp32));
  std::unique_ptr<Worker> second = JoinedWorker(cluster.Options(PushCodec::kFp32));
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ASSERT_EQ(second->rank(), 1u);
  const std::vector<float> values = Uniform(kElements, 7, -1, 1);
  std::vector<float> params;
  Status init;
  const auto started = std::chrono::steady_clock::now();
  std::thread waiting([&] { init = second->InitParameters(values, &params); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(first->Leave().ok());
  waiting.join();
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(init.ok()) << init.ToString();
  EXPECT_EQ(params, values);
  EXPECT_EQ(second->rank(), 0u);
  // (The fixed wait this replaced took 5 s.)
  EXPECT_LT(took, std::chrono::seconds(4)) << "it waited for a timeout, not for its rank";
  EXPECT_TRUE(second->Leave().ok());
}

TEST(WorkerClusterTest, LocoPushesExpectedPayloadsAndMatchesKernelReference) {
  Cluster cluster;
  const WorkerOptions o = cluster.Options(PushCodec::kLoco);
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
// The sum of `server`'s counter `name` over its series (those whose
// direction label is `direction`, when given).
double ServerSum(ParameterServer& server, const std::string& name,
                 const std::string& direction = "") {
  for (const prometheus::MetricFamily& family : server.metrics_registry().Collect()) {
    if (family.name != name) continue;
    double sum = 0;
    for (const prometheus::ClientMetric& m : family.metric) {
      const bool match =
          direction.empty() || std::any_of(m.label.begin(), m.label.end(), [&](const auto& l) {
            return l.name == "direction" && l.value == direction;
          });
      if (match) sum += m.counter.value;
    }
    return sum;
  }
  return -1;
}

double PullsServed(ParameterServer& server) { return ServerSum(server, "loco_server_pulls_total"); }

// Step(compute, ...) with a gradient that becomes final suffix first, as a
// backward pass makes it: shard 1 is pushed (and its step applied) while the
// part of shard 0 is still being computed, no pull touches the parameters
// before the computation ends, and the parameters equal those of plain
// steps on another cluster, bit for bit.
TEST(WorkerClusterTest, OverlappedStepPushesEachShardWhenFinalAndEqualsPlainSteps) {
  Cluster plain_cluster, overlap_cluster;
  std::unique_ptr<Worker> plain = JoinedWorker(plain_cluster.Options(PushCodec::kLoco));
  std::unique_ptr<Worker> overlapped = JoinedWorker(overlap_cluster.Options(PushCodec::kLoco));
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

  // One that fails after shard 1's part was final: shard 1 was pushed (and
  // its step, this worker's alone, applied and pulled). The step fails, and
  // traffic() still counts what crossed the wire, as the server does.
  const TrafficStats traffic_before = overlapped->traffic();
  ParameterServer& shard1 = overlap_cluster.server(1);
  const double push_before = ServerSum(shard1, "loco_server_wire_bytes_total", "push");
  const double pull_before = ServerSum(shard1, "loco_server_wire_bytes_total", "pull");
  auto half = overlapped->Step(
      [&](const GradientReady& ready) -> Status {
        std::fill(buffer.begin(), buffer.end(), 0.01f);
        const double pulls_before = PullsServed(shard1);
        ready(kShardOffset[1]);
        const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (PullsServed(shard1) == pulls_before && std::chrono::steady_clock::now() < limit) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        return Internal("the backward pass failed");
      },
      buffer, &p_overlap);
  EXPECT_EQ(half.status().code(), StatusCode::kInternal);
  EXPECT_EQ(version(1), 4u);
  const TrafficStats traffic_after = overlapped->traffic();
  const double pushed = ServerSum(shard1, "loco_server_wire_bytes_total", "push") - push_before;
  const double pulled = ServerSum(shard1, "loco_server_wire_bytes_total", "pull") - pull_before;
  EXPECT_GT(pushed, 0.0);
  EXPECT_EQ(static_cast<double>(traffic_after.push_wire_bytes - traffic_before.push_wire_bytes),
            pushed);
  EXPECT_EQ(static_cast<double>(traffic_after.pull_wire_bytes - traffic_before.pull_wire_bytes),
            pulled);
  EXPECT_EQ(traffic_after.steps, traffic_before.steps);
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
  std::unique_ptr<Worker> w = JoinedWorker(c.Options(PushCodec::kLoco));
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

// loco_worker_codec_{seconds,fp32_bytes}_total count every element the
// worker encoded (plain steps, and steps whose gradient is final suffix
// first; tests/client/push_parts_test.cc has the encoding in parts), once
// each, and every element it decoded from a pull, the
// first full copy included; the encoding's seconds are a part of the steps.
TEST(WorkerClusterTest, CodecCountersCountEveryElementEncodedAndDecoded) {
  Cluster c;
  std::unique_ptr<Worker> w = JoinedWorker(c.Options(PushCodec::kLoco));
  ASSERT_NE(w, nullptr);
  std::vector<float> params;
  ASSERT_TRUE(w->InitParameters(Uniform(kElements, 7, -1, 1), &params).ok());
  EXPECT_EQ(CounterOf(*w, "loco_worker_codec_fp32_bytes_total", "op", "encode"), 0.0);
  EXPECT_EQ(CounterOf(*w, "loco_worker_codec_fp32_bytes_total", "op", "decode"),
            4.0 * kElements);
  const std::vector<float> g = Uniform(kElements, 8, -0.1f, 0.1f);
  std::vector<float> buffer(kElements);
  constexpr int kPlainSteps = 2, kOverlappedSteps = 2;
  for (int t = 0; t < kPlainSteps; ++t) ASSERT_TRUE(w->Step(g, &params).ok());
  for (int t = 0; t < kOverlappedSteps; ++t) {
    auto r = w->Step(
        [&](const GradientReady& ready) -> Status {
          std::copy(g.begin() + kShardOffset[1], g.end(), buffer.begin() + kShardOffset[1]);
          ready(kShardOffset[1]);
          std::copy(g.begin(), g.begin() + kShardOffset[1], buffer.begin());
          ready(0);
          return Status::Ok();
        },
        buffer, &params);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  constexpr int kSteps = kPlainSteps + kOverlappedSteps;
  EXPECT_EQ(CounterOf(*w, "loco_worker_codec_fp32_bytes_total", "op", "encode"),
            4.0 * kElements * kSteps);
  EXPECT_EQ(CounterOf(*w, "loco_worker_codec_fp32_bytes_total", "op", "decode"),
            static_cast<double>(w->traffic().pull_fp32_bytes));
  EXPECT_EQ(w->traffic().pull_fp32_bytes, uint64_t{4} * kElements * (kSteps + 1));
  const double encode_s = CounterOf(*w, "loco_worker_codec_seconds_total", "op", "encode");
  const double decode_s = CounterOf(*w, "loco_worker_codec_seconds_total", "op", "decode");
  const auto [step_count, step_s] = HistogramOf(*w, "loco_worker_step_duration_seconds");
  ASSERT_EQ(step_count, uint64_t{kSteps});
  EXPECT_GT(encode_s, 0.0);
  EXPECT_GT(decode_s, 0.0);
  EXPECT_LT(encode_s, step_s);
  EXPECT_TRUE(w->Leave().ok());
}

// A member that never pushes (a stalled trainer, or a second worker of the
// same cluster on the pusher's own thread) fails the others' step at
// step_timeout_ms, and the error names it: the shards' ShardStatus says
// whom the open step still waits for.
TEST(WorkerClusterTest, AStepTimedOutNamesTheMembersItWaitsFor) {
  Cluster cluster;
  WorkerOptions o = cluster.Options(PushCodec::kFp32);
  o.step_timeout_ms = 1500;
  std::unique_ptr<Worker> a = JoinedWorker(o);
  std::unique_ptr<Worker> idle = JoinedWorker(o);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(idle, nullptr);
  std::vector<float> pa, pi;
  const std::vector<float> init = Uniform(kElements, 5, -1, 1);
  ASSERT_TRUE(a->InitParameters(init, &pa).ok());
  ASSERT_TRUE(idle->InitParameters(init, &pi).ok());
  auto r = a->Step(Uniform(kElements, 6, -1, 1), &pa);
  ASSERT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_NE(r.status().message().find("within step_timeout_ms = 1500; it still waits for the "
                                      "push of worker(s) " +
                                      std::to_string(idle->worker_id()) + " ("),
            std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(r.status().message().find(std::to_string(a->worker_id()) + " ("), std::string::npos)
      << "the pusher is not awaited: " << r.status().ToString();
  v1::ShardStatusRequest req;
  req.set_shard_id(0);
  v1::ShardStatusResponse status;
  ASSERT_TRUE(cluster.server(0).service().ShardStatus(nullptr, &req, &status).ok());
  EXPECT_EQ(status.pending_pushes(), 1u);
  ASSERT_EQ(status.awaiting_size(), 1);
  EXPECT_EQ(status.awaiting(0), idle->worker_id());
}

TEST(WorkerClusterTest, TwoWorkersStepTogetherOnTheMeanGradient) {
  Cluster cluster;
  std::unique_ptr<Worker> a = JoinedWorker(cluster.Options(PushCodec::kFp32));
  std::unique_ptr<Worker> b = JoinedWorker(cluster.Options(PushCodec::kFp32));
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

}  // namespace
}  // namespace loco

// The cost model against closed forms: a phase is the longest of its
// resources' times, the step is the phases' sum, the bound is the resource
// with the most seconds; the step never grows with a faster link; and the
// shard recommendation follows its stated rule.
#include "plan/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "plan/recommendation.h"
#include "server/shard_machine.h"

namespace loco::plan {
namespace {

Calibration Constants() {
  Calibration c;
  c.worker_s_per_param_sample = 3e-11;
  c.worker_s_per_element = 1e-9;
  c.server_s_per_element_payload = 3e-10;
  c.server_s_per_element = 2e-9;
  c.cpu_s_per_byte = 5e-10;
  c.cpu_s_per_message = 2e-4;
  c.step_overhead_s = 1e-3;
  c.link_efficiency = 0.95;
  c.server_fixed_bytes = 20e6;
  c.server_bytes_per_element = 14;
  c.server_delta_bytes_per_element = 3;
  c.server_push_held_fraction = 0.8;
  return c;
}

ClusterSpec Cluster() {
  ClusterSpec s;
  s.params = 100'000'000;
  s.workers = 8;
  s.shards = 4;
  s.batch_per_gpu = 16;
  s.worker_link_gbps = 1;
  s.server_link_gbps = 1;
  return s;
}

TEST(CostModelTest, PushOverASlowLinkIsTheLinkTimeOfTheExactBytes) {
  const ClusterSpec s = Cluster();
  const Calibration c = Constants();
  StatusOr<Prediction> p = Predict(s, c);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  // The server's link carries W/S times a worker's bytes: it bounds the push.
  const double server_link = p->push_bytes_per_server * 8.0 / (1e9 * c.link_efficiency);
  EXPECT_EQ(p->push.bound, Resource::kServerLink);
  EXPECT_DOUBLE_EQ(p->push.seconds, server_link);
  EXPECT_DOUBLE_EQ(p->step_s, p->compute.seconds + p->push.seconds + p->update.seconds +
                                  p->pull.seconds + c.step_overhead_s);
  const double compute = c.worker_s_per_param_sample * 1e8 * 16 + c.worker_s_per_element * 1e8;
  EXPECT_DOUBLE_EQ(p->compute.seconds, compute);
  const double update = 25'001'984.0 * (8 * c.server_s_per_element_payload +
                                        c.server_s_per_element) / 4;
  EXPECT_NEAR(p->update.seconds, update, 1e-12);
}

TEST(CostModelTest, StepNeverGrowsWithAFasterLink) {
  ClusterSpec s = Cluster();
  double previous = INFINITY;
  for (double gbps : {0.01, 0.1, 0.3, 1.0, 3.0, 10.0, 40.0, 100.0, 400.0, 1600.0}) {
    s.worker_link_gbps = s.server_link_gbps = gbps;
    StatusOr<Prediction> p = Predict(s, Constants());
    ASSERT_TRUE(p.ok());
    EXPECT_LE(p->step_s, previous) << gbps << " Gbit/s";
    previous = p->step_s;
  }
}

TEST(CostModelTest, TheBoundIsTheResourceThatTakesTheMostTime) {
  ClusterSpec s = Cluster();
  s.worker_link_gbps = s.server_link_gbps = 0.01;
  EXPECT_EQ(Predict(s, Constants())->bound, Resource::kServerLink);
  s.server_link_gbps = 1e4;
  EXPECT_EQ(Predict(s, Constants())->bound, Resource::kWorkerLink);
  s.worker_link_gbps = 1e4;
  s.compute_s = 100;
  EXPECT_EQ(Predict(s, Constants())->bound, Resource::kWorkerCompute);
  s.shared_cores = 2;
  s.compute_s = 0;
  s.batch_per_gpu = 100000;  // W workers' compute on 2 cores
  EXPECT_EQ(Predict(s, Constants())->bound, Resource::kHostCpu);
}

TEST(CostModelTest, FullCopiesAreAveragedIntoTheReturnBytes) {
  ClusterSpec s = Cluster();
  s.full_sync_every = 10;
  StatusOr<Prediction> p = Predict(s, Constants());
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->pull_bytes_per_worker_average,
                   p->pull_bytes_per_worker + (4e8 - p->pull_bytes_per_worker) / 10);
  s.full_sync_every = 0;
  EXPECT_DOUBLE_EQ(Predict(s, Constants())->pull_bytes_per_worker_average,
                   static_cast<double>(Predict(s, Constants())->pull_bytes_per_worker));
}

TEST(CostModelTest, ServerMemoryIsTheCalibratedLinearForm) {
  const ClusterSpec s = Cluster();
  const Calibration c = Constants();
  StatusOr<Prediction> p = Predict(s, c);
  ASSERT_TRUE(p.ok());
  const double shard = static_cast<double>(p->largest_shard);
  EXPECT_DOUBLE_EQ(p->server_memory_bytes,
                   c.server_fixed_bytes + (14 + 3) * shard +
                       0.8 * static_cast<double>(p->push_bytes_per_server) +
                       static_cast<double>(p->pull_bytes_per_server) / s.workers);
}

// The server CPU terms against the prediction's bytes: only the bytes of
// a direction that travels as fp32 count as fp32 bytes, and the stream
// seconds are the bytes over one worker link.
TEST(CostModelTest, ServerCpuTermsCountOnlyFp32DirectionsAsFp32Bytes) {
  ClusterSpec s = Cluster();
  const Calibration c = Constants();
  auto terms_of = [&](WireCodec push, WireCodec pull) {
    s.push.codec = push;
    s.pull.codec = pull;
    StatusOr<Prediction> p = Predict(s, c);
    EXPECT_TRUE(p.ok());
    return std::make_pair(ServerCpuTermsOf(s, *p), *p);
  };
  auto [loco, loco_p] = terms_of(WireCodec::kBlockQuant, WireCodec::kBlockQuant);
  EXPECT_EQ(loco.fp32_bytes, 0.0);
  EXPECT_DOUBLE_EQ(loco.bytes, static_cast<double>(loco_p.push_bytes_per_server +
                                                   loco_p.pull_bytes_per_server));
  EXPECT_DOUBLE_EQ(loco.stream_s, loco.bytes * 8 / 1e9);
  auto [mixed, mixed_p] = terms_of(WireCodec::kFp32, WireCodec::kBlockQuant);
  EXPECT_DOUBLE_EQ(mixed.fp32_bytes, static_cast<double>(mixed_p.push_bytes_per_server));
  auto [fp32, fp32_p] = terms_of(WireCodec::kFp32, WireCodec::kFp32);
  EXPECT_DOUBLE_EQ(fp32.fp32_bytes, fp32.bytes);
  EXPECT_EQ(fp32.messages, 2.0 * s.workers);
  EXPECT_EQ(fp32.payload_elements, fp32.elements * s.workers);
}

// A fitted server CPU model (its constants unlike the step model's).
Calibration WithServerCpuModel() {
  Calibration c = Constants();
  c.server_cpu_s_per_byte = 2e-10;
  c.server_cpu_s_per_fp32_byte = 6e-10;
  c.server_cpu_s_per_stream_s = 0.02;
  c.server_cpu_s_per_message = 3e-4;
  c.server_cpu_s_per_element_payload = 4e-10;
  c.server_cpu_s_per_element = 2.5e-9;
  c.server_cpu_runs = 45;
  return c;
}

// With dedicated cores the server's phases spend the server CPU model's
// seconds: on one core, with links, worker CPU and compute out of the way,
// the three server-bound phases add up to exactly Prediction::server_cpu_s,
// and the server is never predicted busier than its cores.
TEST(CostModelTest, DedicatedServerPhasesSpendTheServerCpuModel) {
  ClusterSpec s = Cluster();
  s.worker_link_gbps = 10000;
  s.server_link_gbps = 10000;
  s.worker_cores = 1024;
  s.server_cores = 1;
  s.compute_s = 1e-6;
  const Calibration c = WithServerCpuModel();
  for (WireCodec codec : {WireCodec::kBlockQuant, WireCodec::kFp32}) {
    s.push.codec = codec;
    s.pull.codec = codec;
    StatusOr<Prediction> p = Predict(s, c);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    for (const Phase* phase : {&p->push, &p->update, &p->pull}) {
      EXPECT_EQ(phase->bound, Resource::kServerCpu);
    }
    EXPECT_NEAR(p->push.seconds + p->update.seconds + p->pull.seconds, p->server_cpu_s,
                1e-12 * p->server_cpu_s);
    EXPECT_EQ(p->bound, Resource::kServerCpu);
  }
  for (uint32_t cores : {1u, 2u, 4u, 32u}) {
    for (uint32_t workers : {1u, 8u, 256u}) {
      s.server_cores = cores;
      s.workers = workers;
      StatusOr<Prediction> p = Predict(s, c);
      ASSERT_TRUE(p.ok());
      EXPECT_LE(p->server_cores_busy, cores * (1 + 1e-12)) << cores << " cores, W=" << workers;
    }
  }
}

// On one shared host (bench/e2e's placement) the phases keep the step
// model's constants, fitted to step times there: the server CPU model
// changes the server's CPU figure and not the step.
TEST(CostModelTest, SharedHostPhasesKeepTheStepModelsConstants) {
  ClusterSpec s = Cluster();
  s.shared_cores = 2;
  StatusOr<Prediction> step_model = Predict(s, Constants());
  StatusOr<Prediction> fitted = Predict(s, WithServerCpuModel());
  ASSERT_TRUE(step_model.ok() && fitted.ok());
  EXPECT_EQ(fitted->step_s, step_model->step_s);
  EXPECT_NE(fitted->server_cpu_s, step_model->server_cpu_s);
  s.shared_cores = 0;
  s.server_cores = 1;
  s.worker_link_gbps = s.server_link_gbps = 10000;
  EXPECT_NE(Predict(s, WithServerCpuModel())->step_s, Predict(s, Constants())->step_s);
}

// The planner's copy of loco-server's limit (plan/ may not include server/).
static_assert(kMaxApplyThreads == loco::kMaxApplyThreads);

// The update runs on the apply threads, no more of them than the cores:
// loco-server's default of at most 4, or --apply-threads.
TEST(CostModelTest, TheUpdateRunsOnTheApplyThreadsTheCoresAllow) {
  ClusterSpec s = Cluster();
  s.server_cores = 32;
  const Calibration c = WithServerCpuModel();
  StatusOr<Prediction> p = Predict(s, c);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(UpdateThreads(s), 4u);
  const double update_cpu = p->update.seconds * 4;
  s.apply_threads = 16;
  EXPECT_EQ(UpdateThreads(s), 16u);
  EXPECT_NEAR(Predict(s, c)->update.seconds, update_cpu / 16, 1e-12 * update_cpu);
  s.server_cores = 2;
  EXPECT_EQ(UpdateThreads(s), 2u);
  EXPECT_NEAR(Predict(s, c)->update.seconds, update_cpu / 2, 1e-12 * update_cpu);
  s.apply_threads = 65;
  EXPECT_FALSE(Predict(s, c).ok());
}

TEST(CostModelTest, RefusesAnInvalidCluster) {
  ClusterSpec s = Cluster();
  s.shards = 100000;  // more than 100M / 4096 aligned blocks
  StatusOr<Prediction> p = Predict(s, Constants());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("--shards"), std::string::npos) << p.status().message();
  s = Cluster();
  s.worker_link_gbps = 0;
  EXPECT_FALSE(Predict(s, Constants()).ok());
}

TEST(RecommendationTest, TheFewestShardsWithinTheToleranceOfTheFastest) {
  ClusterSpec s = Cluster();
  s.worker_link_gbps = 10;
  s.server_link_gbps = 10;
  const Calibration c = Constants();
  for (double tolerance : {0.0, 0.05, 0.2}) {
    StatusOr<ShardRecommendation> r = RecommendShards(s, c, 64, tolerance);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    double fastest = INFINITY;
    for (uint32_t k = 1; k <= 64; ++k) {
      s.shards = k;
      fastest = std::min(fastest, Predict(s, c)->step_s);
    }
    EXPECT_DOUBLE_EQ(r->fastest_step_s, fastest);
    uint32_t expected = 0;
    for (uint32_t k = 1; k <= 64 && expected == 0; ++k) {
      s.shards = k;
      if (Predict(s, c)->step_s <= fastest * (1 + tolerance)) expected = k;
    }
    EXPECT_EQ(r->shards, expected) << "tolerance " << tolerance;
    EXPECT_EQ(r->recommended.shards, expected);
  }
  EXPECT_FALSE(RecommendShards(s, c, 0, 0.05).ok());
  EXPECT_FALSE(RecommendShards(s, c, 8, 1.5).ok());
}

TEST(RecommendationTest, NeverMoreShardsThanTheModelHasAlignedBlocks) {
  ClusterSpec s = Cluster();
  s.params = 1'000'000;  // 245 blocks of 4096
  StatusOr<ShardRecommendation> r = RecommendShards(s, Constants(), 4096, 0.0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LE(r->fastest_shards, 245u);
}

}  // namespace
}  // namespace loco::plan

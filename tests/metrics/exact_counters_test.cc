// The counters are exact: a cluster of 1 coordinator, 2 shards and 2 LoCo
// 4-bit workers trains a few steps; every process's /metrics is scraped over
// HTTP and compared with figures computed here from the payload format
// (closed forms), from the Workers' own TrafficStats, and from the requests
// this test sends.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <grpcpp/grpcpp.h>

#include "kernels/quantize.h"
#include "proto/loco.grpc.pb.h"
#include "tests/metrics/metrics_cluster.h"

namespace loco::test {
namespace {

constexpr size_t kElements = 1000;
constexpr uint64_t kSteps = 4;
constexpr uint32_t kWorkers = 2;
// MakeShardMap for 1000 elements, 2 shards, alignment 128: 8 blocks, 4 each.
constexpr size_t kLength[2] = {512, 488};
constexpr uint64_t kNanWorker = 0, kNanStep = 2, kNanIndex = 3;

// 4-bit codes pack two per byte; one fp32 scale per 128-element block.
double PushWireBytes(size_t len) { return double((len * 4 + 7) / 8 + 4 * ((len + 127) / 128)); }
// The delta return path: 8-bit codes, one fp32 scale per 128-element block.
double DeltaWireBytes(size_t len) { return double(len + 4 * ((len + 127) / 128)); }

std::vector<float> Gradient(size_t worker, uint64_t step) {
  std::vector<float> g(kElements);
  for (size_t j = 0; j < kElements; ++j) {
    g[j] = 0.1f * static_cast<float>(std::sin(0.01 * double(j) + double(worker) + double(step)));
  }
  if (worker == kNanWorker && step == kNanStep) g[kNanIndex] = std::numeric_limits<float>::quiet_NaN();
  return g;
}

double Norm(const std::vector<float>& g) {
  double sq = 0;
  for (float x : g) sq += std::isfinite(x) ? double(x) * x : 0.0;
  return std::sqrt(sq);
}

grpc::Status RawPush(const std::string& address, uint32_t shard_id, const v1::Payload& payload) {
  auto stub = v1::ParameterServer::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::PushRequest req;
  req.set_worker_id(1);
  req.set_shard_id(shard_id);
  req.set_step(kSteps);
  *req.mutable_gradient() = payload;
  v1::PushResponse resp;
  return stub->Push(&ctx, req, &resp);
}

TEST(ExactCountersTest, ScrapedBytesStepsAndRejectionsMatchWhatWasSent) {
  ASSERT_EQ(PushWireBytes(512), double(PackedBytes(512, 4) + 4 * NumBlocks(512, 128)));
  ASSERT_EQ(PushWireBytes(488), double(PackedBytes(488, 4) + 4 * NumBlocks(488, 128)));

  MetricsCluster cluster(MetricsClusterOptions{});
  ASSERT_TRUE(cluster.Start());
  ASSERT_TRUE(cluster.Train(kSteps, Gradient));
  for (size_t i = 0; i < kWorkers; ++i) {
    ASSERT_EQ(cluster.worker(i).traffic().resyncs, 0u) << "the closed forms assume no resync";
    ASSERT_EQ(cluster.worker(i).step(), kSteps);
  }

  // ---- workers
  double worker_pull_wire[2] = {0, 0};
  for (size_t i = 0; i < kWorkers; ++i) {
    SCOPED_TRACE("worker " + std::to_string(i));
    auto m = MetricsCluster::Scrape(cluster.worker_metrics_port(i));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const TrafficStats tr = cluster.worker(i).traffic();
    double fp32_push = 0;
    for (uint32_t k = 0; k < 2; ++k) {
      const std::string s = std::to_string(k);
      EXPECT_EQ(m->Sum("loco_worker_wire_bytes_total", {{"shard", s}, {"direction", "push"}}),
                kSteps * PushWireBytes(kLength[k]));
      EXPECT_EQ(m->Sum("loco_worker_fp32_bytes_total", {{"shard", s}, {"direction", "push"}}),
                kSteps * 4.0 * kLength[k]);
      // The initial fp32 copy, then one delta per step.
      const double pull = 4.0 * kLength[k] + kSteps * DeltaWireBytes(kLength[k]);
      EXPECT_EQ(m->Sum("loco_worker_wire_bytes_total", {{"shard", s}, {"direction", "pull"}}),
                pull);
      EXPECT_EQ(m->Sum("loco_worker_fp32_bytes_total", {{"shard", s}, {"direction", "pull"}}),
                (kSteps + 1) * 4.0 * kLength[k]);
      worker_pull_wire[k] += pull;
      fp32_push += m->Sum("loco_worker_fp32_bytes_total", {{"shard", s}, {"direction", "push"}});
    }
    EXPECT_EQ(fp32_push, 4.0 * kElements * kSteps);
    EXPECT_EQ(m->Sum("loco_worker_wire_bytes_total", {{"direction", "push"}}),
              double(tr.push_wire_bytes));
    EXPECT_EQ(m->Sum("loco_worker_wire_bytes_total", {{"direction", "pull"}}),
              double(tr.pull_wire_bytes));
    EXPECT_EQ(m->Sum("loco_worker_fp32_bytes_total", {{"direction", "push"}}),
              double(tr.push_fp32_bytes));
    EXPECT_EQ(m->Sum("loco_worker_steps_total"), double(kSteps));
    EXPECT_EQ(m->Sum("loco_worker_step"), double(kSteps));
    // The world size a worker knows follows its heartbeats: 1 or 2 here.
    EXPECT_GE(m->Sum("loco_worker_world_size"), 1.0);
    EXPECT_LE(m->Sum("loco_worker_world_size"), double(kWorkers));
    EXPECT_EQ(m->Sum("loco_worker_resyncs_total"), 0.0);
    EXPECT_EQ(m->Sum("loco_worker_nonfinite_gradient_elements_total"),
              i == kNanWorker ? 1.0 : 0.0);
    EXPECT_EQ(m->Sum("loco_worker_rpc_duration_seconds_count", {{"direction", "push"}}),
              double(kSteps * 2));
    EXPECT_EQ(m->Sum("loco_worker_rpc_duration_seconds_count", {{"direction", "pull"}}),
              double((kSteps + 1) * 2));
    EXPECT_EQ(m->Sum("loco_worker_step_duration_seconds_count"), double(kSteps));
    const std::vector<float> last = Gradient(i, kSteps - 1);
    EXPECT_NEAR(m->Sum("loco_worker_gradient_norm"), Norm(last), 1e-6 * Norm(last));
    EXPECT_NEAR(m->Sum("loco_worker_loss"), 0.5 * Norm(last) * Norm(last),
                1e-6 * Norm(last) * Norm(last));
    EXPECT_GT(m->Sum("loco_worker_error_state_norm"), 0.0);  // LoCo keeps an error state
    EXPECT_EQ(m->Sum("loco_worker_samples_total"), double(kSteps));
  }

  // ---- servers
  for (uint32_t k = 0; k < 2; ++k) {
    SCOPED_TRACE("shard " + std::to_string(k));
    auto m = MetricsCluster::Scrape(cluster.server(k).metrics_port());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const std::string s = std::to_string(k);
    EXPECT_EQ(m->Sum("loco_server_wire_bytes_total", {{"shard", s}, {"direction", "push"}}),
              kWorkers * kSteps * PushWireBytes(kLength[k]));
    EXPECT_EQ(m->Sum("loco_server_fp32_bytes_total", {{"shard", s}, {"direction", "push"}}),
              kWorkers * kSteps * 4.0 * kLength[k]);
    EXPECT_EQ(m->Sum("loco_server_wire_bytes_total", {{"shard", s}, {"direction", "pull"}}),
              worker_pull_wire[k]);
    EXPECT_EQ(m->Sum("loco_server_fp32_bytes_total", {{"shard", s}, {"direction", "pull"}}),
              kWorkers * (kSteps + 1) * 4.0 * kLength[k]);
    EXPECT_EQ(m->Sum("loco_server_pushes_total"), double(kWorkers * kSteps));
    EXPECT_EQ(m->Sum("loco_server_steps_completed_total"), double(kSteps));
    EXPECT_EQ(m->Sum("loco_server_steps_short_of_participants_total"), 0.0);
    EXPECT_EQ(m->Sum("loco_server_step"), double(kSteps));
    EXPECT_EQ(m->Sum("loco_server_step_participants"), double(kWorkers));
    for (const char* h : {"loco_server_step_duration_seconds_count",
                          "loco_server_straggler_wait_seconds_count",
                          "loco_server_decode_aggregate_seconds_count",
                          "loco_server_optimizer_seconds_count"}) {
      EXPECT_EQ(m->Sum(h), double(kSteps)) << h;
    }
    // Rank 0 offers the initial parameters; the other ranks find them there
    // and send no copy of their own, so no InitShard is refused.
    EXPECT_EQ(m->Sum("loco_server_requests_rejected_total",
                     {{"rpc", "init_shard"}, {"reason", "already_exists"}}),
              0.0);
    EXPECT_EQ(m->Sum("loco_server_nonfinite_payloads_total"), 0.0);
  }

  // ---- coordinator
  {
    auto m = MetricsCluster::Scrape(cluster.coordinator().metrics_port());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->Sum("loco_coordinator_active_workers"), double(kWorkers));
    EXPECT_EQ(m->Sum("loco_coordinator_membership_epoch"), double(kWorkers));
    EXPECT_EQ(m->Sum("loco_coordinator_membership_changes_total", {{"change", "join"}}),
              double(kWorkers));
    EXPECT_EQ(m->Sum("loco_coordinator_membership_changes_total", {{"change", "expire"}}), 0.0);
    EXPECT_EQ(m->Sum("loco_coordinator_registered_servers"), 2.0);
    EXPECT_EQ(m->Sum("loco_coordinator_shards"), 2.0);
    EXPECT_EQ(m->Sum("loco_coordinator_model_elements"), double(kElements));
  }

  // ---- refused pushes are counted by reason and add no bytes
  v1::Payload nan_payload;
  nan_payload.set_codec(v1::CODEC_BLOCK_QUANT);
  nan_payload.set_bits(4);
  nan_payload.set_block_size(128);
  nan_payload.set_offset(0);
  nan_payload.set_length(kLength[0]);
  nan_payload.set_data(std::string(PackedBytes(kLength[0], 4), '\0'));
  std::vector<float> scales(NumBlocks(kLength[0], 128), 1.0f);
  scales[1] = std::numeric_limits<float>::quiet_NaN();
  nan_payload.set_scales(reinterpret_cast<const char*>(scales.data()), scales.size() * 4);
  EXPECT_EQ(RawPush(cluster.server(0).address(), 0, nan_payload).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawPush(cluster.server(1).address(), 7, nan_payload).error_code(),
            grpc::StatusCode::NOT_FOUND);
  auto s0 = MetricsCluster::Scrape(cluster.server(0).metrics_port());
  auto s1 = MetricsCluster::Scrape(cluster.server(1).metrics_port());
  ASSERT_TRUE(s0.ok() && s1.ok());
  EXPECT_EQ(s0->Sum("loco_server_requests_rejected_total", {{"rpc", "push"}, {"reason", "nonfinite"}}),
            1.0);
  EXPECT_EQ(s0->Sum("loco_server_nonfinite_payloads_total"), 1.0);
  EXPECT_EQ(s1->Sum("loco_server_requests_rejected_total", {{"rpc", "push"}, {"reason", "not_found"}}),
            1.0);
  EXPECT_EQ(s0->Sum("loco_server_wire_bytes_total", {{"direction", "push"}}),
            kWorkers * kSteps * PushWireBytes(kLength[0]));

  // ---- a worker leaves
  ASSERT_TRUE(cluster.worker(1).Leave().ok());
  auto c = MetricsCluster::Scrape(cluster.coordinator().metrics_port());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->Sum("loco_coordinator_active_workers"), double(kWorkers - 1));
  EXPECT_EQ(c->Sum("loco_coordinator_membership_changes_total", {{"change", "leave"}}), 1.0);
  EXPECT_EQ(c->Sum("loco_coordinator_membership_epoch"), double(kWorkers + 1));
}

}  // namespace
}  // namespace loco::test

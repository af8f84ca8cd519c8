// Pushes sent in parts (WorkerOptions::push_parts, a placed PushStream):
// against real servers on loopback, each part of a shard reaches its server
// while the gradient computation is still running, and the steps give the
// parameters of plain steps (the whole gradient first) bit for bit. A
// computation that fails midway leaves the server's state as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/metric_family.h>

#include "server/coordinator_server.h"
#include "server/parameter_server.h"
#include "tests/worker/random_batch.h"
#include "worker/worker.h"

namespace loco {
namespace {

constexpr size_t kElements = size_t{1} << 16;
constexpr uint32_t kAlign = 128;

// A coordinator and one parameter server on loopback.
class OneShardCluster {
 public:
  OneShardCluster() {
    CoordinatorServerOptions co;
    co.security = TransportSecurityOptions::Insecure();  // loopback
    co.coordinator.membership.num_shards = 1;
    co.coordinator.membership.shard_align = kAlign;
    co.coordinator.membership.heartbeat_timeout = std::chrono::milliseconds(20000);
    co.coordinator.heartbeat_interval = std::chrono::milliseconds(200);
    coordinator_ = std::make_unique<CoordinatorServer>(co);
    auto port = coordinator_->Start();
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    ParameterServerOptions po;
    po.security = TransportSecurityOptions::Insecure();
    po.coordinator = coordinator_->address();
    po.num_servers = 1;
    po.shard.shard_id = 0;
    po.shard.hyper.lr = 1e-3f;
    po.shard.return_path.codec = PullCodec::kFp32;
    server_ = std::make_unique<ParameterServer>(po);
    auto p = server_->Start();
    EXPECT_TRUE(p.ok()) << p.status().ToString();
  }
  ~OneShardCluster() {
    server_->Shutdown(std::chrono::milliseconds(500));
    coordinator_->Shutdown(std::chrono::milliseconds(500));
  }

  std::unique_ptr<Worker> JoinedWorker(const std::string& codec, int rpc_timeout_ms = 5000) {
    WorkerOptions o;
    o.security = TransportSecurityOptions::Insecure();
    o.coordinator = coordinator_->address();
    o.name = "parts-" + codec;
    o.codec = codec;
    o.block_size = kAlign;
    o.push_chunk_bytes = 4096;  // many parts per shard
    o.rpc_timeout_ms = rpc_timeout_ms;
    o.pull_wait_ms = 2000;
    o.step_timeout_ms = 20000;
    o.join_timeout_ms = 20000;
    o.max_retries = 3;
    auto w = Worker::Connect(o);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    if (!w.ok()) return nullptr;
    Status s = (*w)->Join(kElements);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return std::move(w).value();
  }
  uint64_t version() { return server_->service().Snapshot().version(); }
  // loco_server_push_chunks_total, read from the server's registry.
  double ChunksReceived() {
    for (const prometheus::MetricFamily& family : server_->metrics_registry().Collect()) {
      if (family.name != "loco_server_push_chunks_total") continue;
      double sum = 0;
      for (const prometheus::ClientMetric& m : family.metric) sum += m.counter.value;
      return sum;
    }
    return -1;
  }

 private:
  std::unique_ptr<CoordinatorServer> coordinator_;
  std::unique_ptr<ParameterServer> server_;
};

// Polls `pred` every 2 ms for up to 10 s.
template <typename Pred>
bool Eventually(Pred pred) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

class PushPartsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PushPartsTest, PartsReachTheServerWhileTheGradientComputesAndEqualPlainSteps) {
  OneShardCluster plain_cluster, parts_cluster;
  std::unique_ptr<Worker> plain = plain_cluster.JoinedWorker(GetParam());
  std::unique_ptr<Worker> parted = parts_cluster.JoinedWorker(GetParam());
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(parted, nullptr);
  const std::vector<float> init = Uniform(kElements, 21, -1, 1);
  std::vector<float> p_plain, p_parts;
  ASSERT_TRUE(plain->InitParameters(init, &p_plain).ok());
  ASSERT_TRUE(parted->InitParameters(init, &p_parts).ok());

  std::vector<float> buffer(kElements);
  constexpr size_t kQuarter = kElements / 4;
  for (uint64_t t = 0; t < 3; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    const std::vector<float> g = Uniform(kElements, 300 + t, -0.1f, 0.1f);
    auto r_plain = plain->Step(g, &p_plain);
    ASSERT_TRUE(r_plain.ok()) << r_plain.status().ToString();

    std::fill(buffer.begin(), buffer.end(), std::numeric_limits<float>::quiet_NaN());
    bool early_chunks = false, not_applied_early = false;
    const double chunks_before = parts_cluster.ChunksReceived();
    auto r = parted->Step(
        [&](const GradientReady& ready) -> Status {
          // The last quarter first, as a backward pass finishes it.
          for (size_t q = 4; q-- > 0;) {
            std::copy(g.begin() + q * kQuarter, g.begin() + (q + 1) * kQuarter,
                      buffer.begin() + q * kQuarter);
            ready(q * kQuarter);
            if (q == 3) {
              // Its chunks arrive while the rest is not even written.
              early_chunks = Eventually(
                  [&] { return parts_cluster.ChunksReceived() >= chunks_before + 2; });
              not_applied_early = parts_cluster.version() == t;
            }
          }
          return Status::Ok();
        },
        buffer, &p_parts);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(early_chunks);
    EXPECT_TRUE(not_applied_early);
    EXPECT_EQ(parts_cluster.version(), t + 1);
    EXPECT_EQ(r->push_wire_bytes, r_plain->push_wire_bytes);
    // Many chunks: the shard went in parts of push_chunk_bytes.
    EXPECT_GE(parts_cluster.ChunksReceived() - chunks_before, 4.0);
  }
  ASSERT_EQ(p_parts.size(), p_plain.size());
  EXPECT_EQ(std::memcmp(p_parts.data(), p_plain.data(), p_plain.size() * sizeof(float)), 0);

  // A computation that fails after some parts went out: the step fails with
  // its status and the server applies nothing (the stream is cancelled and
  // the incomplete push refused); the next step goes through.
  const double chunks_before = parts_cluster.ChunksReceived();
  auto failed = parted->Step(
      [&](const GradientReady& ready) -> Status {
        std::fill(buffer.end() - kQuarter, buffer.end(), 0.01f);
        ready(kElements - kQuarter);
        EXPECT_TRUE(Eventually([&] { return parts_cluster.ChunksReceived() > chunks_before; }));
        return Internal("no gradient");
      },
      buffer, &p_parts);
  EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
  EXPECT_EQ(parts_cluster.version(), 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(parts_cluster.version(), 3u);
  auto next = parted->Step(Uniform(kElements, 400, -0.1f, 0.1f), &p_parts);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(parts_cluster.version(), 4u);
  EXPECT_TRUE(plain->Leave().ok());
  EXPECT_TRUE(parted->Leave().ok());
}

// A computation that outlasts one RPC's deadline: the stream of its parts
// stays open for the step (step_timeout_ms), not for rpc_timeout_ms, and
// the step goes through.
TEST(PushPartsDeadline, ALongComputationKeepsItsStreamOpenPastOneRpcDeadline) {
  OneShardCluster cluster;
  std::unique_ptr<Worker> w = cluster.JoinedWorker("loco", /*rpc_timeout_ms=*/200);
  ASSERT_NE(w, nullptr);
  std::vector<float> params;
  ASSERT_TRUE(w->InitParameters(Uniform(kElements, 3, -1, 1), &params).ok());
  const std::vector<float> g = Uniform(kElements, 4, -0.1f, 0.1f);
  std::vector<float> buffer(kElements);
  const double chunks_before = cluster.ChunksReceived();
  auto r = w->Step(
      [&](const GradientReady& ready) -> Status {
        std::copy(g.begin() + kElements / 2, g.end(), buffer.begin() + kElements / 2);
        ready(kElements / 2);
        EXPECT_TRUE(Eventually([&] { return cluster.ChunksReceived() > chunks_before; }));
        std::this_thread::sleep_for(std::chrono::milliseconds(600));  // 3 RPC deadlines
        std::copy(g.begin(), g.begin() + kElements / 2, buffer.begin());
        ready(0);
        return Status::Ok();
      },
      buffer, &params);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(cluster.version(), 1u);
  EXPECT_TRUE(w->Leave().ok());
}

INSTANTIATE_TEST_SUITE_P(Codecs, PushPartsTest, ::testing::Values("loco", "fp32", "bf16"));

}  // namespace
}  // namespace loco

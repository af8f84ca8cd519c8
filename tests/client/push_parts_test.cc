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

#include "tests/common/random_batch.h"
#include "tests/client/worker_cluster.h"
#include "client/worker.h"

namespace loco {
namespace {

constexpr size_t kPushElements = size_t{1} << 16;

using cluster_fixture::Cluster;

// A worker of `codec` joined to the one-shard `cluster`, many parts per
// shard.
std::unique_ptr<Worker> PartsWorker(Cluster& cluster, PushCodec codec,
                                    int rpc_timeout_ms = 5000) {
  WorkerOptions o = cluster.Options(codec);
  o.name = std::string("parts-") + PushCodecName(codec);
  o.push_chunk_bytes = 4096;  // many parts per shard
  o.rpc_timeout_ms = rpc_timeout_ms;
  return cluster_fixture::JoinedWorker(o, kPushElements);
}

uint64_t Version(Cluster& cluster) { return cluster.server(0).service().Snapshot().version(); }

// loco_server_push_chunks_total, read from the server's registry.
double ChunksReceived(Cluster& cluster) {
  for (const prometheus::MetricFamily& family : cluster.server(0).metrics_registry().Collect()) {
    if (family.name != "loco_server_push_chunks_total") continue;
    double sum = 0;
    for (const prometheus::ClientMetric& m : family.metric) sum += m.counter.value;
    return sum;
  }
  return -1;
}

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

class PushPartsTest : public ::testing::TestWithParam<PushCodec> {};

TEST_P(PushPartsTest, PartsReachTheServerWhileTheGradientComputesAndEqualPlainSteps) {
  Cluster plain_cluster(1), parts_cluster(1);
  std::unique_ptr<Worker> plain = PartsWorker(plain_cluster, GetParam());
  std::unique_ptr<Worker> parted = PartsWorker(parts_cluster, GetParam());
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(parted, nullptr);
  const std::vector<float> init = Uniform(kPushElements, 21, -1, 1);
  std::vector<float> p_plain, p_parts;
  ASSERT_TRUE(plain->InitParameters(init, &p_plain).ok());
  ASSERT_TRUE(parted->InitParameters(init, &p_parts).ok());

  std::vector<float> buffer(kPushElements);
  constexpr size_t kQuarter = kPushElements / 4;
  for (uint64_t t = 0; t < 3; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    const std::vector<float> g = Uniform(kPushElements, 300 + t, -0.1f, 0.1f);
    auto r_plain = plain->Step(g, &p_plain);
    ASSERT_TRUE(r_plain.ok()) << r_plain.status().ToString();

    std::fill(buffer.begin(), buffer.end(), std::numeric_limits<float>::quiet_NaN());
    bool early_chunks = false, not_applied_early = false;
    const double chunks_before = ChunksReceived(parts_cluster);
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
                  [&] { return ChunksReceived(parts_cluster) >= chunks_before + 2; });
              not_applied_early = Version(parts_cluster) == t;
            }
          }
          return Status::Ok();
        },
        buffer, &p_parts);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(early_chunks);
    EXPECT_TRUE(not_applied_early);
    EXPECT_EQ(Version(parts_cluster), t + 1);
    EXPECT_EQ(r->push_wire_bytes, r_plain->push_wire_bytes);
    // Many chunks: the shard went in parts of push_chunk_bytes.
    EXPECT_GE(ChunksReceived(parts_cluster) - chunks_before, 4.0);
  }
  ASSERT_EQ(p_parts.size(), p_plain.size());
  EXPECT_EQ(std::memcmp(p_parts.data(), p_plain.data(), p_plain.size() * sizeof(float)), 0);
  // The parts' encodings count each element once, as the whole shards do.
  for (const Worker* w : {plain.get(), parted.get()}) {
    EXPECT_EQ(cluster_fixture::CounterOf(*w, "loco_worker_codec_fp32_bytes_total", "op",
                                         "encode"),
              4.0 * kPushElements * 3);
  }

  // A computation that fails after some parts went out: the step fails with
  // its status and the server applies nothing (the stream is cancelled and
  // the incomplete push refused); the next step goes through.
  const double chunks_before = ChunksReceived(parts_cluster);
  auto failed = parted->Step(
      [&](const GradientReady& ready) -> Status {
        std::fill(buffer.end() - kQuarter, buffer.end(), 0.01f);
        ready(kPushElements - kQuarter);
        EXPECT_TRUE(Eventually([&] { return ChunksReceived(parts_cluster) > chunks_before; }));
        return Internal("no gradient");
      },
      buffer, &p_parts);
  EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
  EXPECT_EQ(Version(parts_cluster), 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(Version(parts_cluster), 3u);
  auto next = parted->Step(Uniform(kPushElements, 400, -0.1f, 0.1f), &p_parts);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(Version(parts_cluster), 4u);
  EXPECT_TRUE(plain->Leave().ok());
  EXPECT_TRUE(parted->Leave().ok());
}

// A computation that outlasts one RPC's deadline: the stream of its parts
// stays open for the step (step_timeout_ms), not for rpc_timeout_ms, and
// the step goes through.
TEST(PushPartsDeadline, ALongComputationKeepsItsStreamOpenPastOneRpcDeadline) {
  Cluster cluster(1);
  std::unique_ptr<Worker> w = PartsWorker(cluster, PushCodec::kLoco, /*rpc_timeout_ms=*/200);
  ASSERT_NE(w, nullptr);
  std::vector<float> params;
  ASSERT_TRUE(w->InitParameters(Uniform(kPushElements, 3, -1, 1), &params).ok());
  const std::vector<float> g = Uniform(kPushElements, 4, -0.1f, 0.1f);
  std::vector<float> buffer(kPushElements);
  const double chunks_before = ChunksReceived(cluster);
  auto r = w->Step(
      [&](const GradientReady& ready) -> Status {
        std::copy(g.begin() + kPushElements / 2, g.end(), buffer.begin() + kPushElements / 2);
        ready(kPushElements / 2);
        EXPECT_TRUE(Eventually([&] { return ChunksReceived(cluster) > chunks_before; }));
        std::this_thread::sleep_for(std::chrono::milliseconds(600));  // 3 RPC deadlines
        std::copy(g.begin(), g.begin() + kPushElements / 2, buffer.begin());
        ready(0);
        return Status::Ok();
      },
      buffer, &params);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Version(cluster), 1u);
  EXPECT_TRUE(w->Leave().ok());
}

INSTANTIATE_TEST_SUITE_P(Codecs, PushPartsTest, ::testing::Values(PushCodec::kLoco, PushCodec::kFp32, PushCodec::kBf16));

}  // namespace
}  // namespace loco

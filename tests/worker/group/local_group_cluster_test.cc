// One node of N = 2 local ranks (CpuLocalGroup, LocalGroupRunner, ONE
// loco::Worker) in a real in-process cluster (coordinator and 3 parameter
// servers on loopback):
//   * fp32: the node ends with the same parameters as the flat layout, 2
//     separate workers (2 members) pushing the same per-device gradients;
//   * loco: the node matches ClusterReference fed the node's mean gradient
//     as ONE member: the mean is compressed once per node, with one error
//     state per shard. The flat layout differs there by design: each of its
//     workers compresses its own gradient with its own error state, so the
//     servers average two quantised payloads instead of quantising the
//     average.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "tests/worker/group/node_cluster.h"
#include "tests/integration/cluster_reference.h"
#include "worker/group/local_group_cpu.h"
#include "worker/group/local_group_runner.h"

namespace loco::test {
namespace {

constexpr int kDevices = 2;
constexpr int kSteps = 6;

std::unique_ptr<CpuLocalGroup> GroupFor(const Worker& w, int n) {
  auto slices = SlicesForShards(ShardSlices(w), n, 128);
  EXPECT_TRUE(slices.ok()) << slices.status().ToString();
  if (!slices.ok()) return nullptr;
  auto g = CpuLocalGroup::Create(std::move(slices).value(), kNodeElements,
                                 std::chrono::milliseconds(10000));
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? std::move(g).value() : nullptr;
}

// Runs kSteps node steps; *grads[t][r] records device r's gradient at step t.
void TrainNode(TestCluster& cluster, PushCodec codec, const std::vector<float>& init,
               std::vector<float>* final_params,
               std::vector<std::vector<std::vector<float>>>* grads) {
  std::unique_ptr<Worker> w = JoinNode(NodeWorkerOptions(cluster, codec, "node"));
  ASSERT_NE(w, nullptr);
  std::unique_ptr<CpuLocalGroup> group = GroupFor(*w, kDevices);
  ASSERT_NE(group, nullptr);
  // With 3 shards and 2 ranks each rank owns whole shards.
  ASSERT_EQ(group->slice(1).offset, cluster.Range(1).offset);
  LocalGroupRunner runner(group.get(), w.get());
  ASSERT_TRUE(w->InitParameters(init, runner.node_params()).ok());
  ASSERT_TRUE(runner.Broadcast().ok());
  grads->assign(kSteps, std::vector<std::vector<float>>(kDevices));
  for (int t = 0; t < kSteps; ++t) {
    auto r = runner.Step([&](int rank, std::span<const float> at, std::vector<float>* g) {
      *g = DeviceGradient(rank, t, at);
      (*grads)[static_cast<size_t>(t)][static_cast<size_t>(rank)] = *g;
      return Status::Ok();
    });
    ASSERT_TRUE(r.ok()) << "step " << t << ": " << r.status().ToString();
    EXPECT_FALSE(r->resynced);
    EXPECT_EQ(w->step(), static_cast<uint64_t>(t + 1));
    // Every replica holds the Worker's copy.
    for (int rank = 0; rank < kDevices; ++rank) {
      ASSERT_EQ(runner.replica(rank), *runner.node_params()) << "rank " << rank << ", step " << t;
    }
  }
  // One member: the coordinator's view counts the node once.
  EXPECT_EQ(w->world_size(), 1u);
  *final_params = runner.replica(1);
  ASSERT_TRUE(w->Leave().ok());
}

TEST(LocalGroupClusterTest, Fp32NodeOfTwoDevicesMatchesTwoFlatWorkers) {
  const std::vector<float> init = Uniform(kNodeElements, 1, -1, 1);
  std::vector<float> node_params;
  std::vector<std::vector<std::vector<float>>> node_grads;
  {
    TestCluster cluster(NodeClusterOptions());
    ASSERT_TRUE(cluster.Start());
    TrainNode(cluster, PushCodec::kFp32, init, &node_params, &node_grads);
    if (HasFatalFailure()) return;
  }

  // The flat layout: 2 workers, one per device, each its own member.
  TestCluster cluster(NodeClusterOptions());
  ASSERT_TRUE(cluster.Start());
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::vector<float>> params(kDevices);
  for (int r = 0; r < kDevices; ++r) {
    workers.push_back(JoinNode(NodeWorkerOptions(cluster, PushCodec::kFp32, "flat-" + std::to_string(r))));
    ASSERT_NE(workers.back(), nullptr);
  }
  for (int r = 0; r < kDevices; ++r) {
    const size_t i = static_cast<size_t>(r);
    ASSERT_TRUE(workers[i]->InitParameters(init, &params[i]).ok());
  }
  std::vector<Status> st(kDevices);
  std::vector<std::thread> threads;
  for (int r = 0; r < kDevices; ++r) {
    threads.emplace_back([&, r] {
      const size_t i = static_cast<size_t>(r);
      for (int t = 0; t < kSteps && st[i].ok(); ++t) {
        auto res = workers[i]->Step(DeviceGradient(r, t, params[i]), &params[i]);
        if (!res.ok()) st[i] = res.status();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(params[0], params[1]);
  // Tolerance 1e-6: the node averages in float as (g0 + g1) / 2 before its
  // push; the flat servers sum the two decoded fp32 payloads and divide by
  // the participant count. Two-term float sums commute, so the copies are
  // expected bit-equal; the bound leaves room for a server that rounds the
  // mean once more (relative 6e-8 of a gradient, which moves AdamW's
  // m̂/√v̂ about as much: lr·1e-7 = 2e-10 per step), while a wrong mean (the
  // sum, one device only) moves the parameters by ~lr = 2e-3 per step.
  for (size_t i = 0; i < kNodeElements; ++i) {
    ASSERT_NEAR(node_params[i], params[0][i], 1e-6) << "element " << i;
  }
  // Not trivially equal: training moved the parameters.
  double moved = 0;
  for (size_t i = 0; i < kNodeElements; ++i) {
    moved = std::max(moved, std::abs(static_cast<double>(node_params[i]) - init[i]));
  }
  EXPECT_GT(moved, 1e-3);
}

TEST(LocalGroupClusterTest, LocoNodeCompressesTheMeanGradientOnce) {
  const std::vector<float> init = Uniform(kNodeElements, 2, -1, 1);
  TestCluster cluster(NodeClusterOptions());
  ASSERT_TRUE(cluster.Start());
  std::vector<float> node_params;
  std::vector<std::vector<std::vector<float>>> grads;
  TrainNode(cluster, PushCodec::kLoco, init, &node_params, &grads);
  if (HasFatalFailure()) return;

  CompressionConfig codec;
  codec.mode = CompensationMode::kLoco;
  codec.bits = 4;
  codec.block_size = 128;
  codec.beta = 0.6f;
  codec.reset_period = 4;
  codec.error_bits = 8;
  std::vector<ShardRange> shards;
  for (uint32_t k = 0; k < kNodeShards; ++k) shards.push_back(cluster.Range(k));
  ClusterReference ref(codec, NodeHyper(), shards, init);
  ref.AddWorker(1);
  for (int t = 0; t < kSteps; ++t) {
    // The node's mean, in the order CpuLocalGroup documents: (g0 + g1) / 2.
    std::vector<float> mean(kNodeElements);
    for (size_t i = 0; i < kNodeElements; ++i) {
      mean[i] = (grads[static_cast<size_t>(t)][0][i] + grads[static_cast<size_t>(t)][1][i]) / 2.0f;
    }
    ASSERT_TRUE(ref.Step(t, {{1, mean}}));
  }
  // Tolerances as tests/integration/cluster_test.cc (the fp32 cluster
  // against the double reference): |got − ref| <= 1e-5·(1 + |ref|).
  size_t bad = 0;
  for (size_t i = 0; i < kNodeElements; ++i) {
    const double want = ref.params()[i];
    if (!(std::abs(node_params[i] - want) <= 1e-5 * (1 + std::abs(want)))) ++bad;
  }
  EXPECT_EQ(bad, 0u) << "parameters differ from the once-per-node reference";
  // AdamW's update hardly depends on the gradient's scale; its first moment
  // does: the servers' m must be the reference's (the mean, not e.g. the
  // sum of the devices' gradients). Bound as cluster_test: 1e-5·|ref| + 1e-8.
  for (uint32_t k = 0; k < kNodeShards; ++k) {
    const ShardStore store = cluster.Snapshot(k);
    const size_t offset = static_cast<size_t>(shards[k].offset);
    size_t bad_m = 0;
    ASSERT_EQ(store.m().size(), shards[k].length);
    for (size_t i = 0; i < store.m().size(); ++i) {
      const double want = ref.m()[offset + i];
      if (!(std::abs(store.m()[i] - want) <= 1e-5 * std::abs(want) + 1e-8)) ++bad_m;
    }
    EXPECT_EQ(bad_m, 0u) << "shard " << k << "'s first moment differs from the reference";
  }

  // Discrimination: compressing each device's gradient separately (the
  // flat layout's pipeline) lands measurably elsewhere.
  ClusterReference flat(codec, NodeHyper(), shards, init);
  flat.AddWorker(1);
  flat.AddWorker(2);
  for (int t = 0; t < kSteps; ++t) {
    ASSERT_TRUE(flat.Step(t, {{1, grads[static_cast<size_t>(t)][0]},
                              {2, grads[static_cast<size_t>(t)][1]}}));
  }
  size_t differ = 0;
  for (size_t i = 0; i < kNodeElements; ++i) {
    if (std::abs(flat.params()[i] - ref.params()[i]) > 1e-4) ++differ;
  }
  EXPECT_GT(differ, kNodeElements / 100);
}

TEST(LocalGroupClusterTest, FailedGradientFailsTheStepWithoutPushing) {
  TestCluster cluster(NodeClusterOptions());
  ASSERT_TRUE(cluster.Start());
  std::unique_ptr<Worker> w = JoinNode(NodeWorkerOptions(cluster, PushCodec::kFp32, "node"));
  ASSERT_NE(w, nullptr);
  std::unique_ptr<CpuLocalGroup> group = GroupFor(*w, 2);
  ASSERT_NE(group, nullptr);
  LocalGroupRunner runner(group.get(), w.get());
  ASSERT_TRUE(w->InitParameters(Uniform(kNodeElements, 3, -1, 1), runner.node_params()).ok());
  ASSERT_TRUE(runner.Broadcast().ok());
  auto r = runner.Step([](int rank, std::span<const float> at, std::vector<float>* g) {
    if (rank == 1) return InvalidArgument("no data");
    *g = std::vector<float>(at.size(), 0.5f);
    return Status::Ok();
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(w->step(), 0u);
  v1::ShardStatusResponse st;
  ASSERT_TRUE(cluster.ShardStatus(0, &st).ok());
  EXPECT_EQ(st.pending_pushes(), 0u);
  EXPECT_EQ(st.version(), 0u);
}

}  // namespace
}  // namespace loco::test

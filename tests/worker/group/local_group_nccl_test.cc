// NcclLocalGroup on real CUDA devices; every test skips itself without one.
//   * N = 1 (one device): the collectives are the identity, and the full
//     node path (runner, one Worker, in-process cluster) gives the same
//     parameters as the CPU group of one rank.
//   * N = 2 (two devices or more): the mean and the all-gather against a
//     double reference (NCCL's summation order is its own: bounded, not
//     bit-compared).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "kernels/device.h"
#include "tests/worker/group/node_cluster.h"
#include "worker/group/local_group_cpu.h"
#include "worker/group/local_group_nccl.h"
#include "worker/group/local_group_runner.h"

namespace loco::test {
namespace {

std::vector<Status> OnRanks(int n, const std::function<Status(int)>& fn) {
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&st, &fn, r] { st[static_cast<size_t>(r)] = fn(r); });
  }
  for (auto& t : threads) t.join();
  return st;
}

TEST(NcclLocalGroupTest, CreateWithoutEnoughDevicesIsUnavailable) {
  const int n = cuda::DeviceCount();
  std::vector<int> devices;
  std::vector<LocalSlice> slices;
  for (int d = 0; d <= n; ++d) {
    devices.push_back(d);
    slices.push_back({static_cast<size_t>(d), 1});
  }
  auto g = NcclLocalGroup::Create(devices, slices, slices.size(), std::chrono::milliseconds(1000));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnavailable) << g.status().ToString();
}

TEST(NcclLocalGroupTest, OneDeviceCollectivesAreTheIdentity) {
  if (cuda::DeviceCount() < 1) GTEST_SKIP() << "no CUDA device";
  const size_t n = 5000;
  auto g = NcclLocalGroup::Create({0}, {{0, n}}, n, std::chrono::milliseconds(30000));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::vector<float> grads = Uniform(n, 9, -2, 2);
  std::vector<float> mean(n), full(n);
  ASSERT_TRUE((*g)->ReduceScatterMean(0, grads, mean).ok());
  EXPECT_EQ(mean, grads);
  ASSERT_TRUE((*g)->AllGather(0, grads, full).ok());
  EXPECT_EQ(full, grads);
}

TEST(NcclLocalGroupTest, OneDeviceNodeMatchesTheCpuGroupInACluster) {
  if (cuda::DeviceCount() < 1) GTEST_SKIP() << "no CUDA device";
  const std::vector<float> init = Uniform(kNodeElements, 4, -1, 1);
  std::vector<std::vector<float>> finals;
  for (bool nccl : {false, true}) {
    SCOPED_TRACE(nccl ? "nccl" : "cpu");
    TestCluster cluster(NodeClusterOptions());
    ASSERT_TRUE(cluster.Start());
    std::unique_ptr<Worker> w = JoinNode(NodeWorkerOptions(cluster, PushCodec::kLoco, "node"));
    ASSERT_NE(w, nullptr);
    auto slices = SlicesForShards(ShardSlices(*w), 1, 128);
    ASSERT_TRUE(slices.ok());
    std::unique_ptr<LocalGroup> group;
    if (nccl) {
      auto g = NcclLocalGroup::Create({0}, *slices, kNodeElements, std::chrono::milliseconds(30000));
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      group = std::move(g).value();
    } else {
      auto g = CpuLocalGroup::Create(*slices, kNodeElements, std::chrono::milliseconds(30000));
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      group = std::move(g).value();
    }
    LocalGroupRunner runner(group.get(), w.get());
    ASSERT_TRUE(w->InitParameters(init, runner.node_params()).ok());
    ASSERT_TRUE(runner.Broadcast().ok());
    for (int t = 0; t < 4; ++t) {
      auto r = runner.Step([t](int rank, std::span<const float> at, std::vector<float>* g) {
        *g = DeviceGradient(rank, t, at);
        return Status::Ok();
      });
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
    EXPECT_EQ(w->step(), 4u);
    EXPECT_EQ(runner.replica(0), *runner.node_params());
    finals.push_back(runner.replica(0));
  }
  // A mean of one gradient is that gradient in both groups: same pushes,
  // same LoCo state, same parameters, bit for bit.
  EXPECT_EQ(finals[0], finals[1]);
}

TEST(NcclLocalGroupTest, TwoDevicesReduceAndGatherAgainstDoubleReference) {
  if (cuda::DeviceCount() < 2) GTEST_SKIP() << "fewer than 2 CUDA devices";
  const size_t n = 10007;
  const std::vector<LocalSlice> slices = {{0, 6000}, {6000, 4007}};
  auto g = NcclLocalGroup::Create({0, 1}, slices, n, std::chrono::milliseconds(30000));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::vector<std::vector<float>> grads = {Uniform(n, 1, -1, 1), Uniform(n, 2, -1, 1)};
  std::vector<float> mean(n);
  std::vector<std::vector<float>> full(2, std::vector<float>(n));
  const auto st = OnRanks(2, [&](int r) {
    const LocalSlice s = slices[static_cast<size_t>(r)];
    Status a = (*g)->ReduceScatterMean(r, grads[static_cast<size_t>(r)],
                                       std::span<float>(mean).subspan(s.offset, s.length));
    if (!a.ok()) return a;
    return (*g)->AllGather(r, std::span<const float>(mean).subspan(s.offset, s.length),
                           full[static_cast<size_t>(r)]);
  });
  for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < n; ++i) {
    const double want = (static_cast<double>(grads[0][i]) + grads[1][i]) / 2;
    // One addition and one scaling in float: <= 2^-23·(|g0| + |g1|).
    ASSERT_LE(std::abs(mean[i] - want),
              std::ldexp(1.0, -23) * (std::abs(grads[0][i]) + std::abs(grads[1][i])))
        << i;
  }
  EXPECT_EQ(full[0], mean);
  EXPECT_EQ(full[1], mean);
}

}  // namespace
}  // namespace loco::test

// CpuLocalGroup's collectives against references computed here: the mean
// in double (with a bound on float's summation error) and, bit for bit, the
// documented float order; all-gather against the concatenation of the
// slices; slices from the shard map; bounded failure when a rank is missing.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/worker/group/node_cluster.h"
#include "kernels/device.h"
#include "worker/group/local_group_cpu.h"
#include "worker/group/make_local_group.h"

namespace loco::test {
namespace {

// Runs fn(r) for every rank on its own thread and returns the statuses.
std::vector<Status> OnRanks(int n, const std::function<Status(int)>& fn) {
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&st, &fn, r] { st[static_cast<size_t>(r)] = fn(r); });
  }
  for (auto& t : threads) t.join();
  return st;
}

std::unique_ptr<CpuLocalGroup> MakeGroup(std::vector<LocalSlice> slices, size_t n,
                                         std::chrono::milliseconds timeout) {
  auto g = CpuLocalGroup::Create(std::move(slices), n, timeout);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? std::move(g).value() : nullptr;
}

// Checks one ReduceScatterMean of `slices.size()` ranks over `n` elements.
void CheckReduceScatter(const std::vector<LocalSlice>& slices, size_t n, int rounds) {
  const int ranks = static_cast<int>(slices.size());
  auto group = MakeGroup(slices, n, std::chrono::milliseconds(10000));
  ASSERT_NE(group, nullptr);
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::vector<float>> grads;
    for (int r = 0; r < ranks; ++r) {
      grads.push_back(Uniform(n, 7 * static_cast<uint64_t>(round) + static_cast<uint64_t>(r),
                              -3.0f, 3.0f));
    }
    std::vector<float> node(n, -999.0f);
    const auto st = OnRanks(ranks, [&](int r) {
      const LocalSlice s = group->slice(r);
      return group->ReduceScatterMean(r, grads[static_cast<size_t>(r)],
                                      std::span<float>(node).subspan(s.offset, s.length));
    });
    for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.ToString();
    for (size_t i = 0; i < n; ++i) {
      double exact = 0, abs_sum = 0;
      float ordered = grads[0][i];
      for (int r = 0; r < ranks; ++r) {
        exact += grads[static_cast<size_t>(r)][i];
        abs_sum += std::abs(grads[static_cast<size_t>(r)][i]);
        if (r > 0) ordered += grads[static_cast<size_t>(r)][i];
      }
      exact /= ranks;
      // N − 1 float additions (each off by at most u = 2^-24 times a
      // partial sum <= Σ|g|), divided by N, plus the division's own rounding
      // (u·|mean| <= u·Σ|g|/N): |error| <= u·Σ|g|, with a hair for u².
      const double bound = 1.001 * std::ldexp(1.0, -24) * abs_sum;
      ASSERT_LE(std::abs(node[i] - exact), bound) << "element " << i << ", round " << round;
      // The documented order, rank 0 first, in float: bit for bit.
      ASSERT_EQ(node[i], ordered / static_cast<float>(ranks)) << "element " << i;
    }
  }
}

TEST(CpuLocalGroupTest, ReduceScatterMeanMatchesReferenceWithUnevenAndEmptySlices) {
  // 1000 elements over 4 ranks: 513, 0 (empty), 400, 87.
  CheckReduceScatter({{0, 513}, {513, 0}, {513, 400}, {913, 87}}, 1000, 5);
}

TEST(CpuLocalGroupTest, ReduceScatterMeanWithOneRankIsTheGradient) {
  CheckReduceScatter({{0, 777}}, 777, 2);
}

TEST(CpuLocalGroupTest, ReduceScatterMeanOfSevenRanksIsReusable) {
  std::vector<LocalSlice> slices;
  for (size_t r = 0; r < 7; ++r) slices.push_back({r * 150, 150});
  CheckReduceScatter(slices, 1050, 20);
}

TEST(CpuLocalGroupTest, AllGatherAssemblesEverySliceOnEveryRank) {
  const std::vector<LocalSlice> slices = {{0, 100}, {100, 1}, {101, 0}, {101, 299}};
  const size_t n = 400;
  auto group = MakeGroup(slices, n, std::chrono::milliseconds(10000));
  ASSERT_NE(group, nullptr);
  for (int round = 0; round < 3; ++round) {
    const std::vector<float> truth = Uniform(n, 50 + static_cast<uint64_t>(round), -1, 1);
    std::vector<std::vector<float>> full(slices.size(), std::vector<float>(n, 0.0f));
    const auto st = OnRanks(4, [&](int r) {
      const LocalSlice s = group->slice(r);
      // Each rank contributes its slice from a buffer of its own.
      std::vector<float> mine(truth.begin() + static_cast<std::ptrdiff_t>(s.offset),
                              truth.begin() + static_cast<std::ptrdiff_t>(s.offset + s.length));
      return group->AllGather(r, mine, full[static_cast<size_t>(r)]);
    });
    for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.ToString();
    for (const auto& f : full) EXPECT_EQ(f, truth);
  }
}

TEST(CpuLocalGroupTest, MissingRankFailsTheOthersWithDeadlineExceeded) {
  auto group = MakeGroup({{0, 64}, {64, 64}}, 128, std::chrono::milliseconds(100));
  ASSERT_NE(group, nullptr);
  const std::vector<float> g(128, 1.0f);
  std::vector<float> out(64);
  // Rank 1 never calls.
  const Status s = group->ReduceScatterMean(0, g, out);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  // The group is broken for good: the late rank fails at once, too.
  const Status late = group->ReduceScatterMean(1, g, out);
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded) << late.ToString();
}

TEST(CpuLocalGroupTest, InvalidCallAbortsThePeersInsteadOfTimingOut) {
  // A 60 s timeout: the peer must fail through the abort (kAborted), not by
  // waiting for the timeout (which would be kDeadlineExceeded).
  auto group = MakeGroup({{0, 64}, {64, 64}}, 128, std::chrono::milliseconds(60000));
  ASSERT_NE(group, nullptr);
  const std::vector<float> g(128, 1.0f), short_g(100, 1.0f);
  std::vector<float> out0(64), out1(64);
  Status s0;
  std::thread peer([&] { s0 = group->ReduceScatterMean(0, g, out0); });
  const Status s1 = group->ReduceScatterMean(1, short_g, out1);
  peer.join();
  EXPECT_EQ(s1.code(), StatusCode::kInvalidArgument) << s1.ToString();
  EXPECT_EQ(s0.code(), StatusCode::kAborted) << s0.ToString();
}

TEST(CpuLocalGroupTest, CreateValidatesSlices) {
  EXPECT_FALSE(CpuLocalGroup::Create({}, 10, std::chrono::milliseconds(10)).ok());
  EXPECT_FALSE(CpuLocalGroup::Create({{0, 5}, {6, 4}}, 10, std::chrono::milliseconds(10)).ok());
  EXPECT_FALSE(CpuLocalGroup::Create({{0, 5}, {5, 4}}, 10, std::chrono::milliseconds(10)).ok());
  EXPECT_FALSE(CpuLocalGroup::Create({{0, 10}}, 10, std::chrono::milliseconds(0)).ok());
  EXPECT_TRUE(CpuLocalGroup::Create({{0, 5}, {5, 5}}, 10, std::chrono::milliseconds(10)).ok());
}

// Reference for SlicesForShards: every rank's slice is a union of whole
// shards, in order, none empty, covering the model.
// MakeLocalGroup: the CPU kind is a working CpuLocalGroup (the mean of two
// ranks' gradients, computed here); the NCCL kind says why it cannot be made
// without NCCL in the build or without the devices.
TEST(MakeLocalGroupTest, CpuKindReducesAndNcclKindSaysWhyItIsMissing) {
  const std::vector<LocalSlice> slices{{0, 3}, {3, 2}};
  auto cpu = MakeLocalGroup(LocalGroupKind::kCpu, slices, 5, std::chrono::seconds(5));
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  ASSERT_EQ((*cpu)->size(), 2);
  const std::vector<std::vector<float>> grads{{1, 2, 3, 4, 5}, {3, 2, 1, 0, -1}};
  std::vector<std::vector<float>> out{std::vector<float>(3), std::vector<float>(2)};
  std::vector<Status> st(2);
  std::thread other([&] { st[1] = (*cpu)->ReduceScatterMean(1, grads[1], out[1]); });
  st[0] = (*cpu)->ReduceScatterMean(0, grads[0], out[0]);
  other.join();
  ASSERT_TRUE(st[0].ok() && st[1].ok()) << st[0].ToString() << st[1].ToString();
  EXPECT_EQ(out[0], (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(out[1], (std::vector<float>{2, 2}));

  auto nccl = MakeLocalGroup(LocalGroupKind::kNccl, slices, 5, std::chrono::seconds(5));
  if (!HaveNcclLocalGroup()) {
    ASSERT_FALSE(nccl.ok());
    EXPECT_EQ(nccl.status().code(), StatusCode::kUnimplemented) << nccl.status().ToString();
    EXPECT_NE(nccl.status().message().find("NCCL"), std::string::npos);
  } else if (cuda::DeviceCount() < 2) {
    ASSERT_FALSE(nccl.ok());
    EXPECT_EQ(nccl.status().code(), StatusCode::kUnavailable) << nccl.status().ToString();
  } else {
    EXPECT_TRUE(nccl.ok()) << nccl.status().ToString();
  }
}

TEST(SlicesForShardsTest, RanksOwnContiguousRunsOfWholeShards) {
  const std::vector<LocalSlice> shards = {{0, 1024}, {1024, 1024}, {2048, 1024}, {3072, 1024},
                                          {4096, 512}};
  for (int n = 1; n <= 5; ++n) {
    auto got = SlicesForShards(shards, n, 128);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), static_cast<size_t>(n));
    size_t next_shard = 0;
    for (const LocalSlice& s : *got) {
      ASSERT_GT(s.length, 0u);
      ASSERT_EQ(s.offset, shards[next_shard].offset);
      size_t covered = 0;
      while (covered < s.length) covered += shards[next_shard++].length;
      ASSERT_EQ(covered, s.length) << "slice ends inside a shard (n = " << n << ")";
    }
    EXPECT_EQ(next_shard, shards.size());
  }
  // n = 2: the boundary nearest to 4608 / 2 = 2304 is 2048.
  auto two = SlicesForShards(shards, 2, 128);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ((*two)[1].offset, 2048u);
}

TEST(SlicesForShardsTest, FewerShardsThanRanksSplitsEvenlyInAlignedUnits) {
  const std::vector<LocalSlice> shards = {{0, 1000}};
  auto got = SlicesForShards(shards, 4, 128);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  // ceil(1000 / 128) = 8 units: 2 per rank.
  const std::vector<size_t> offsets = {0, 256, 512, 768}, lengths = {256, 256, 256, 232};
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_EQ((*got)[r].offset, offsets[r]);
    EXPECT_EQ((*got)[r].length, lengths[r]);
  }
  EXPECT_FALSE(SlicesForShards(shards, 0, 128).ok());
  EXPECT_FALSE(SlicesForShards(shards, kMaxLocalDevices + 1, 128).ok());
  EXPECT_FALSE(SlicesForShards(std::vector<LocalSlice>{{0, 5}, {6, 5}}, 2, 1).ok());
}

}  // namespace
}  // namespace loco::test

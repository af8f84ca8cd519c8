#include "tests/worker/group/node_cluster.h"

#include <random>

namespace loco::test {

AdamWParams NodeHyper() {
  AdamWParams h;
  h.lr = 2e-3f;
  h.beta1 = 0.9f;
  h.beta2 = 0.99f;
  h.eps = 1e-5f;
  h.weight_decay = 0.01f;
  return h;
}

ClusterOptions NodeClusterOptions() {
  ClusterOptions o;
  o.num_shards = kNodeShards;
  o.shard_align = kNodeAlign;
  o.heartbeat_timeout = std::chrono::milliseconds(30000);
  o.heartbeat_interval = std::chrono::milliseconds(200);
  o.shard.hyper = NodeHyper();
  o.shard.return_path.codec = PullCodec::kFp32;
  return o;
}

WorkerOptions NodeWorkerOptions(const TestCluster& cluster, PushCodec codec,
                                const std::string& name) {
  WorkerOptions o;
  o.security = TransportSecurityOptions::Insecure();  // loopback
  o.coordinator = cluster.coordinator_address();
  o.name = name;
  o.codec = codec;
  o.bits = 4;
  o.block_size = 128;
  o.beta = 0.6f;
  o.reset_period = 4;
  o.error_bits = 8;
  o.rpc_timeout_ms = 5000;
  o.pull_wait_ms = 2000;
  o.step_timeout_ms = 10000;
  o.join_timeout_ms = 10000;
  o.max_retries = 3;
  return o;
}

std::vector<float> Uniform(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 12345);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<float> DeviceGradient(int device, int64_t step, std::span<const float> params) {
  const std::vector<float> target = Uniform(params.size(), 100 + static_cast<uint64_t>(device),
                                            -1.0f, 1.0f);
  std::vector<float> g = Uniform(
      params.size(), 1000 + 64 * static_cast<uint64_t>(device) + static_cast<uint64_t>(step),
      -0.05f, 0.05f);
  for (size_t i = 0; i < g.size(); ++i) g[i] += 0.2f * (params[i] - target[i]);
  return g;
}

std::vector<LocalSlice> ShardSlices(const Worker& worker) {
  std::vector<LocalSlice> out;
  for (const auto& [offset, length] : worker.shard_ranges()) {
    out.push_back({static_cast<size_t>(offset), static_cast<size_t>(length)});
  }
  return out;
}

std::unique_ptr<Worker> JoinNode(const WorkerOptions& options) {
  auto w = Worker::Connect(options);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return nullptr;
  const Status s = (*w)->Join(kNodeElements);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return nullptr;
  return std::move(w).value();
}

}  // namespace loco::test

// For loco::Worker's tests against real in-process servers on loopback: a
// Cluster of one coordinator and (by default two) parameter-server shards
// (fp32 return path, AdamW lr 1e-3) on free ports, plain AdamW in double to
// compare with, and a Worker joined to it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/metric_family.h>

#include "server/coordinator/coordinator_server.h"
#include "server/parameter_server.h"
#include "client/worker.h"

namespace loco::cluster_fixture {

constexpr size_t kElements = 1000;
constexpr uint32_t kShards = 2;
constexpr uint32_t kAlign = 128;
// MakeShardMap's closed form for 1000 elements, 2 shards, align 128:
// ceil(1000/128) = 8 aligned blocks, 4 per shard.
constexpr size_t kShardOffset[kShards] = {0, 512};
constexpr size_t kShardLength[kShards] = {512, 488};

class Cluster {
 public:
  // `heartbeat_timeout`: how long the coordinator keeps a silent worker;
  // `heartbeat_interval`: how often it tells workers to beat.
  explicit Cluster(uint32_t shards = kShards,
                   std::chrono::milliseconds heartbeat_timeout = std::chrono::milliseconds(20000),
                   std::chrono::milliseconds heartbeat_interval = std::chrono::milliseconds(200)) {
    CoordinatorServerOptions co;
    co.security = TransportSecurityOptions::Insecure();  // loopback
    co.coordinator.membership.num_shards = shards;
    co.coordinator.membership.shard_align = kAlign;
    co.coordinator.membership.heartbeat_timeout = heartbeat_timeout;
    co.coordinator.heartbeat_interval = heartbeat_interval;
    coordinator_ = std::make_unique<CoordinatorServer>(co);
    auto port = coordinator_->Start();
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    for (uint32_t k = 0; k < shards; ++k) {
      ParameterServerOptions po;
      po.security = TransportSecurityOptions::Insecure();
      po.coordinator = coordinator_->address();
      po.num_servers = shards;
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

  WorkerOptions Options(PushCodec codec) const {
    WorkerOptions o;
    o.security = TransportSecurityOptions::Insecure();
    o.coordinator = coordinator_->address();
    o.name = std::string("test-") + PushCodecName(codec);
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

inline std::unique_ptr<Worker> JoinedWorker(const WorkerOptions& o,
                                            size_t elements = kElements) {
  auto w = Worker::Connect(o);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return nullptr;
  Status s = (*w)->Join(elements);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::move(w).value();
}

// The value of the worker's counter `name`, of its series labelled `label` =
// `value`; -1 when there is none.
inline double CounterOf(const Worker& w, const std::string& name, const std::string& label,
                        const std::string& value) {
  for (const prometheus::MetricFamily& family : w.metrics_registry()->Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (l.name == label && l.value == value) return m.counter.value;
      }
    }
  }
  return -1;
}

}  // namespace loco::cluster_fixture

// MetricsCluster: a TestCluster (coordinator and S parameter servers) and W
// loco::Workers in this process on 127.0.0.1, every one serving /metrics on a
// port of the kernel's choosing, for tests that scrape them over real HTTP.
// Each worker has its own registry with the training loop's metrics
// (TrainingMetrics) beside the Worker's, as loco-worker does.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "metrics/metrics_endpoint.h"
#include "server/coordinator/coordinator_server.h"
#include "server/parameter_server.h"
#include "tests/cluster/test_cluster.h"
#include "tests/metrics/prom_text.h"
#include "worker/training_metrics.h"
#include "client/worker.h"

namespace loco::test {

struct MetricsClusterOptions {
  uint32_t shards = 2;
  uint32_t workers = 2;
  size_t elements = 1000;
  uint32_t shard_align = 128;
  int block_size = 128;  // the workers' quantization block; divides shard_align
  PushCodec codec = PushCodec::kLoco;
  PullCodec pull_codec = PullCodec::kDelta;
};

// grads(worker index, step) -> that worker's gradient at that step.
using GradientFn = std::function<std::vector<float>(size_t, uint64_t)>;

class MetricsCluster {
 public:
  explicit MetricsCluster(MetricsClusterOptions options);
  ~MetricsCluster();

  // Starts everything, joins every worker, then initialises them (so that
  // every worker takes part in step 0). Bounded by the workers' timeouts.
  ::testing::AssertionResult Start();
  // Every worker runs `steps` synchronous steps concurrently, one thread each.
  ::testing::AssertionResult Train(uint64_t steps, const GradientFn& grads);

  // Every endpoint's /metrics body: coordinator, servers, workers.
  StatusOr<std::vector<std::string>> ScrapeTexts();
  // The same, parsed and merged.
  StatusOr<PromText> ScrapeAll();
  static StatusOr<PromText> Scrape(int port);

  const MetricsClusterOptions& options() const { return options_; }
  CoordinatorServer& coordinator() { return cluster_->coordinator_server(); }
  ParameterServer& server(size_t k) { return cluster_->server_object(static_cast<uint32_t>(k)); }
  Worker& worker(size_t i) { return *workers_[i]->worker; }
  int worker_metrics_port(size_t i) const { return workers_[i]->endpoint->port(); }

 private:
  struct WorkerSlot {
    std::shared_ptr<prometheus::Registry> registry;
    std::unique_ptr<TrainingMetrics> training;
    std::unique_ptr<MetricsEndpoint> endpoint;
    std::unique_ptr<Worker> worker;
    std::vector<float> params;
  };

  MetricsClusterOptions options_;
  std::unique_ptr<TestCluster> cluster_;
  std::vector<std::unique_ptr<WorkerSlot>> workers_;
};

}  // namespace loco::test

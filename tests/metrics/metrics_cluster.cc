#include "tests/metrics/metrics_cluster.h"

#include <thread>

#include "tests/metrics/http_get.h"

namespace loco::test {

MetricsCluster::MetricsCluster(MetricsClusterOptions options) : options_(std::move(options)) {
  ClusterOptions c;
  c.num_shards = options_.shards;
  c.shard_align = options_.shard_align;
  c.heartbeat_timeout = std::chrono::milliseconds(20000);
  c.heartbeat_interval = std::chrono::milliseconds(200);
  c.step_poll = std::chrono::milliseconds(20);
  c.shard.return_path.codec = options_.pull_codec;
  c.metrics = true;
  cluster_ = std::make_unique<TestCluster>(c);
}

MetricsCluster::~MetricsCluster() {
  for (auto& w : workers_) {
    if (w->worker) (void)w->worker->Leave();
  }
  // Each metrics endpoint takes up to civetweb's 2 s poll quantum to stop:
  // stop them all at once.
  std::vector<std::thread> stops;
  for (auto& w : workers_) stops.emplace_back([&w] { w.reset(); });
  stops.emplace_back([this] { cluster_.reset(); });
  for (auto& t : stops) t.join();
}

::testing::AssertionResult MetricsCluster::Start() {
  if (auto started = cluster_->Start(); !started) return started;
  for (uint32_t i = 0; i < options_.workers; ++i) {
    auto slot = std::make_unique<WorkerSlot>();
    slot->registry = std::make_shared<prometheus::Registry>();
    slot->training = std::make_unique<TrainingMetrics>(*slot->registry);
    auto endpoint = MetricsEndpoint::Start("127.0.0.1", 0, slot->registry);
    if (!endpoint.ok()) return ::testing::AssertionFailure() << endpoint.status().ToString();
    slot->endpoint = std::move(endpoint).value();
    WorkerOptions o;
    o.security = TransportSecurityOptions::Insecure();  // loopback
    o.coordinator = cluster_->coordinator_address();
    o.name = "metrics-test-" + std::to_string(i);
    o.codec = options_.codec;
    o.block_size = options_.block_size;
    o.rpc_timeout_ms = 5000;
    o.pull_wait_ms = 2000;
    o.step_timeout_ms = 20000;
    o.join_timeout_ms = 20000;
    o.max_retries = 3;
    o.metrics_registry = slot->registry;
    auto w = Worker::Connect(o);
    if (!w.ok()) return ::testing::AssertionFailure() << w.status().ToString();
    slot->worker = std::move(w).value();
    Status joined = slot->worker->Join(options_.elements);
    if (!joined.ok()) return ::testing::AssertionFailure() << joined.ToString();
    workers_.push_back(std::move(slot));
  }
  // Every worker joined before any initialises: step 0 then waits for all.
  std::vector<float> init(options_.elements);
  for (size_t i = 0; i < init.size(); ++i) init[i] = 0.001f * static_cast<float>(i % 97);
  for (auto& w : workers_) {
    Status s = w->worker->InitParameters(init, &w->params);
    if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult MetricsCluster::Train(uint64_t steps, const GradientFn& grads) {
  std::vector<Status> results(workers_.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < workers_.size(); ++i) {
    threads.emplace_back([&, i] {
      WorkerSlot& w = *workers_[i];
      for (uint64_t n = 0; n < steps; ++n) {
        const std::vector<float> g = grads(i, w.worker->step());
        double loss = 0;
        for (float x : g) loss += 0.5 * static_cast<double>(x) * x;
        auto r = w.worker->Step(g, &w.params);
        if (!r.ok()) {
          results[i] = r.status();
          return;
        }
        w.training->OnStep(loss, 1);
        w.training->OnThroughput(1.0);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) {
    if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
  }
  return ::testing::AssertionSuccess();
}

StatusOr<std::vector<std::string>> MetricsCluster::ScrapeTexts() {
  std::vector<int> ports{coordinator().metrics_port()};
  for (uint32_t k = 0; k < options_.shards; ++k) ports.push_back(server(k).metrics_port());
  for (auto& w : workers_) ports.push_back(w->endpoint->port());
  std::vector<std::string> texts;
  for (int port : ports) {
    auto body = HttpGet("127.0.0.1", port, "/metrics");
    if (!body.ok()) return body.status();
    texts.push_back(std::move(body).value());
  }
  return texts;
}

StatusOr<PromText> MetricsCluster::ScrapeAll() {
  auto texts = ScrapeTexts();
  if (!texts.ok()) return texts.status();
  PromText all;
  for (const std::string& t : *texts) {
    auto parsed = PromText::Parse(t);
    if (!parsed.ok()) return parsed.status();
    all.Merge(*parsed);
  }
  return all;
}

StatusOr<PromText> MetricsCluster::Scrape(int port) {
  auto body = HttpGet("127.0.0.1", port, "/metrics");
  if (!body.ok()) return body.status();
  return PromText::Parse(*body);
}

}  // namespace loco::test

#include "tests/integration/local_cluster.h"

#include <grpcpp/grpcpp.h>

#include <thread>

namespace loco::test {

LocalCluster::LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {}

LocalCluster::~LocalCluster() {
  for (auto& s : servers_) s->Shutdown(std::chrono::milliseconds(500));
  if (coordinator_) coordinator_->Shutdown(std::chrono::milliseconds(500));
}

::testing::AssertionResult LocalCluster::Start() {
  CoordinatorServerOptions co;
  co.coordinator.membership.num_shards = options_.num_servers;
  co.coordinator.membership.shard_align = options_.shard_align;
  co.coordinator.membership.heartbeat_timeout = options_.heartbeat_timeout;
  co.coordinator.heartbeat_interval = options_.heartbeat_interval;
  coordinator_ = std::make_unique<CoordinatorServer>(co);
  auto port = coordinator_->Start();
  if (!port.ok()) {
    return ::testing::AssertionFailure() << "coordinator: " << port.status().ToString();
  }
  for (uint32_t k = 0; k < options_.num_servers; ++k) {
    ParameterServerOptions so;
    so.coordinator = coordinator_->address();
    so.num_servers = options_.num_servers;
    so.step_poll = options_.step_poll;
    so.shard = options_.shard;
    so.shard.shard_id = k;
    servers_.push_back(std::make_unique<ParameterServer>(so));
    auto p = servers_.back()->Start();
    if (!p.ok()) {
      return ::testing::AssertionFailure() << "server " << k << ": " << p.status().ToString();
    }
    stubs_.push_back(v1::ParameterServer::NewStub(
        grpc::CreateChannel(servers_.back()->address(), grpc::InsecureChannelCredentials())));
  }
  for (int i = 0; i < 500; ++i) {  // bounded: 500 x 10 ms
    bool all = true;
    for (auto& s : servers_) all = all && s->registered();
    if (all) return ::testing::AssertionSuccess();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ::testing::AssertionFailure() << "the servers did not register within 5 s";
}

::testing::AssertionResult LocalCluster::ShardStatus(uint32_t shard, v1::ShardStatusResponse* out) {
  if (shard >= stubs_.size()) {
    return ::testing::AssertionFailure()
           << "no shard " << shard << " (started " << stubs_.size() << ")";
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ShardStatusRequest req;
  req.set_shard_id(shard);
  const grpc::Status s = stubs_[shard]->ShardStatus(&ctx, req, out);
  if (!s.ok()) {
    return ::testing::AssertionFailure() << "ShardStatus(" << shard << "): " << s.error_message();
  }
  return ::testing::AssertionSuccess();
}

ShardStore LocalCluster::Snapshot(uint32_t shard) {
  return servers_.at(shard)->service().Snapshot();
}

bool LocalCluster::WaitForPendingPushes(uint32_t pushes, std::chrono::milliseconds timeout) {
  constexpr auto kPoll = std::chrono::milliseconds(5);
  const auto until = std::chrono::steady_clock::now() + timeout;
  // Bounded twice: by the clock and by the number of polls that fit in it.
  for (int64_t i = 0; i <= timeout / kPoll; ++i) {
    bool all = true;
    for (auto& s : servers_) all = all && s->service().pending_pushes() == pushes;
    if (all) return true;
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(kPoll);
  }
  return false;
}

}  // namespace loco::test

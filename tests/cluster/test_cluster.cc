#include "tests/cluster/test_cluster.h"

#include <thread>

#include "client/push_chunks.h"

namespace loco::test {
namespace {

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
}

v1::PushRequest PushRequestFor(uint32_t shard, uint64_t worker, uint64_t step,
                               const v1::Payload& gradient) {
  v1::PushRequest req;
  req.set_worker_id(worker);
  req.set_shard_id(shard);
  req.set_step(step);
  *req.mutable_gradient() = gradient;
  return req;
}

MetricsEndpointOptions LoopbackMetrics(bool enabled) {
  MetricsEndpointOptions m;
  m.enabled = enabled;
  m.host = "127.0.0.1";
  m.port = 0;
  return m;
}

}  // namespace

TestCluster::TestCluster(ClusterOptions options) : options_(std::move(options)) {}

TestCluster::~TestCluster() {
  // Each metrics endpoint takes up to civetweb's 2 s poll quantum to stop,
  // so everything stops at once. No server calls the coordinator while it
  // shuts down, so the order does not matter.
  std::vector<std::thread> stops;
  for (auto& s : servers_) {
    stops.emplace_back([&s] { s->Shutdown(std::chrono::milliseconds(500)); });
  }
  if (coordinator_) {
    stops.emplace_back([this] { coordinator_->Shutdown(std::chrono::milliseconds(500)); });
  }
  for (auto& t : stops) t.join();
}

::testing::AssertionResult TestCluster::Start() {
  CoordinatorServerOptions co;
  co.security = TransportSecurityOptions::Insecure();  // in-process, loopback only
  co.coordinator.membership.num_shards = options_.num_shards;
  co.coordinator.membership.shard_align = options_.shard_align;
  co.coordinator.membership.heartbeat_timeout = options_.heartbeat_timeout;
  co.coordinator.heartbeat_interval = options_.heartbeat_interval;
  co.metrics = LoopbackMetrics(options_.metrics);
  coordinator_ = std::make_unique<CoordinatorServer>(co);
  auto port = coordinator_->Start();
  if (!port.ok()) {
    return ::testing::AssertionFailure() << "coordinator: " << port.status().ToString();
  }
  coordinator_stub_ = v1::Coordinator::NewStub(
      grpc::CreateChannel(coordinator_->address(), grpc::InsecureChannelCredentials()));
  for (uint32_t k = 0; k < options_.num_shards; ++k) {
    ParameterServerOptions so;
    so.security = TransportSecurityOptions::Insecure();
    so.coordinator = coordinator_->address();
    so.num_servers = options_.num_shards;
    so.step_poll = options_.step_poll;
    so.stream_window_bytes = options_.stream_window_bytes;
    so.shard = options_.shard;
    so.shard.shard_id = k;
    so.metrics = LoopbackMetrics(options_.metrics);
    servers_.push_back(std::make_unique<ParameterServer>(so));
    auto p = servers_.back()->Start();
    if (!p.ok()) {
      return ::testing::AssertionFailure() << "server " << k << ": " << p.status().ToString();
    }
    // Whole answers of large shards (a bf16 copy of millions of elements)
    // exceed gRPC's 4 MiB default; the servers' own limit still applies.
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    server_channels_.push_back(grpc::CreateCustomChannel(
        servers_.back()->address(), grpc::InsecureChannelCredentials(), args));
    server_stubs_.push_back(v1::ParameterServer::NewStub(server_channels_.back()));
  }
  for (int i = 0; i < 500; ++i) {  // bounded: 500 x 10 ms
    bool all = true;
    for (auto& s : servers_) all = all && s->registered();
    if (all) return ::testing::AssertionSuccess();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ::testing::AssertionFailure() << "the servers did not register within 5 s";
}

v1::ParameterServer::Stub& TestCluster::StubFor(uint32_t shard) {
  return shard < server_stubs_.size() ? *server_stubs_[shard] : *server_stubs_[0];
}

grpc::Status TestCluster::Join(uint64_t total_elements, v1::JoinResponse* out) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::JoinRequest req;
  req.set_name("test");
  req.set_total_elements(total_elements);
  return coordinator_stub_->Join(&ctx, req, out);
}

grpc::Status TestCluster::Leave(uint64_t worker_id) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::LeaveRequest req;
  req.set_worker_id(worker_id);
  v1::LeaveResponse resp;
  return coordinator_stub_->Leave(&ctx, req, &resp);
}

grpc::Status TestCluster::Heartbeat(uint64_t worker_id) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::HeartbeatRequest req;
  req.set_worker_id(worker_id);
  v1::HeartbeatResponse resp;
  return coordinator_stub_->Heartbeat(&ctx, req, &resp);
}

grpc::Status TestCluster::InitShard(uint32_t shard, uint64_t worker, const v1::Payload& params) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::InitShardRequest req;
  req.set_worker_id(worker);
  req.set_shard_id(shard);
  *req.mutable_params() = params;
  v1::InitShardResponse resp;
  return StubFor(shard).InitShard(&ctx, req, &resp);
}

grpc::Status TestCluster::Push(uint32_t shard, uint64_t worker, uint64_t step,
                               const v1::Payload& gradient, v1::PushResponse* out) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::PushResponse resp;
  return StubFor(shard).Push(&ctx, PushRequestFor(shard, worker, step, gradient),
                             out ? out : &resp);
}

grpc::Status TestCluster::PushInChunks(uint32_t shard, uint64_t worker, uint64_t step,
                                       const v1::Payload& gradient, size_t chunk_bytes,
                                       v1::PushResponse* out) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::PushResponse resp;
  const auto& channel = server_channels_[shard < server_channels_.size() ? shard : 0];
  return SendPushInChunks(channel, &ctx, PushRequestFor(shard, worker, step, gradient),
                          chunk_bytes, out ? out : &resp);
}

grpc::Status TestCluster::Pull(const v1::PullRequest& req, v1::PullResponse* out) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  return StubFor(req.shard_id()).Pull(&ctx, req, out);
}

grpc::Status TestCluster::ShardStatus(uint32_t shard, v1::ShardStatusResponse* out) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ShardStatusRequest req;
  req.set_shard_id(shard);
  return server_stubs_.at(shard)->ShardStatus(&ctx, req, out);
}

grpc::Status TestCluster::PullFull(uint32_t shard, uint64_t min_version, uint32_t wait_ms,
                                   v1::PullResponse* out) {
  v1::PullRequest req;
  req.set_shard_id(shard);
  req.set_min_version(min_version);
  req.set_wait_ms(wait_ms);
  req.set_want_full(true);
  req.set_have_any(true);
  return Pull(req, out);
}

ShardRange TestCluster::Range(uint32_t shard) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ClusterView view;
  auto s = coordinator_stub_->GetClusterView(&ctx, v1::GetClusterViewRequest(), &view);
  EXPECT_TRUE(s.ok()) << s.error_message();
  if (!s.ok() || shard >= static_cast<uint32_t>(view.shard_map().shards_size())) return {};
  const auto& info = view.shard_map().shards(static_cast<int>(shard));
  return {info.offset(), info.length()};
}

ShardStore TestCluster::Snapshot(uint32_t shard) {
  return servers_.at(shard)->service().Snapshot();
}

bool TestCluster::WaitForPendingPushes(uint32_t pushes, std::chrono::milliseconds timeout) {
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

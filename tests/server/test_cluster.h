// TestCluster: a coordinator and S parameter servers in this process on
// 127.0.0.1 (ports chosen by the kernel), plus raw generated stubs as the
// client, so the tests exercise the real gRPC surface.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <vector>

#include "proto/loco.grpc.pb.h"
#include "server/coordinator_server.h"
#include "server/parameter_server.h"

namespace loco::test {

struct ClusterOptions {
  uint32_t num_shards = 1;
  uint32_t shard_align = 128;
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::chrono::milliseconds heartbeat_interval{100};
  std::chrono::milliseconds step_poll{20};
  ShardServiceOptions shard;  // shard_id is set per server
};

class TestCluster {
 public:
  explicit TestCluster(ClusterOptions options);
  ~TestCluster();

  // Starts everything and waits (at most 5 s) until every server registered.
  ::testing::AssertionResult Start();

  v1::Coordinator::Stub& coordinator() { return *coordinator_stub_; }
  v1::ParameterServer::Stub& server(uint32_t k) { return *server_stubs_[k]; }
  ParameterServer& server_object(uint32_t k) { return *servers_[k]; }
  ShardService& service(uint32_t k) { return servers_[k]->service(); }

  // RPC helpers with a 10 s deadline; they return the gRPC status.
  grpc::Status Join(uint64_t total_elements, v1::JoinResponse* out);
  grpc::Status Leave(uint64_t worker_id);
  grpc::Status Heartbeat(uint64_t worker_id);
  grpc::Status InitShard(uint32_t shard, uint64_t worker, const v1::Payload& params);
  grpc::Status Push(uint32_t shard, uint64_t worker, uint64_t step, const v1::Payload& gradient,
                    v1::PushResponse* out = nullptr);
  grpc::Status Pull(const v1::PullRequest& req, v1::PullResponse* out);
  grpc::Status ShardStatus(uint32_t shard, v1::ShardStatusResponse* out);
  // Pulls shard `k` in fp32 (want_full), waiting up to `wait_ms` for
  // `min_version`.
  grpc::Status PullFull(uint32_t shard, uint64_t min_version, uint32_t wait_ms,
                        v1::PullResponse* out);

  // The shard's range as published by the coordinator.
  ShardRange Range(uint32_t shard);

 private:
  ClusterOptions options_;
  std::unique_ptr<CoordinatorServer> coordinator_;
  std::vector<std::unique_ptr<ParameterServer>> servers_;
  std::unique_ptr<v1::Coordinator::Stub> coordinator_stub_;
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> server_stubs_;
};

}  // namespace loco::test

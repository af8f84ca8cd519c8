// TestCluster: a coordinator and S parameter servers inside the test
// process, on 127.0.0.1 with ports chosen by the kernel, plus raw generated
// stubs as a client, so that tests exercise the real gRPC surface, either
// directly (the RPC helpers) or through loco::Worker objects pointed at
// coordinator_address().
//
// Not thread-safe: set up, query and tear down from the test's main thread;
// the servers themselves are thread-safe and serve the workers' threads.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proto/loco.grpc.pb.h"
#include "server/coordinator/coordinator_server.h"
#include "server/parameter_server.h"
#include "common/shard_layout.h"
#include "server/shard_store.h"

namespace loco::test {

struct ClusterOptions {
  uint32_t num_shards = 1;
  uint32_t shard_align = 128;
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::chrono::milliseconds heartbeat_interval{100};
  // How often a server with pending pushes re-asks for the live participants.
  std::chrono::milliseconds step_poll{20};
  // Each server's HTTP/2 window per incoming call (ParameterServerOptions).
  int stream_window_bytes = ParameterServerOptions().stream_window_bytes;
  ShardServiceOptions shard;  // shard_id is set per server
  // Serve /metrics on 127.0.0.1 (a port of the kernel's choosing) from the
  // coordinator and every server.
  bool metrics = false;
};

class TestCluster {
 public:
  explicit TestCluster(ClusterOptions options);
  // Shuts the coordinator and the servers down, all at once (bounded: about
  // half a second of gRPC drain, plus up to 2 s per metrics endpoint).
  ~TestCluster();
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  // Starts the coordinator and the servers and waits (at most 5 s) until
  // every server registered.
  ::testing::AssertionResult Start();

  const ClusterOptions& options() const { return options_; }
  uint32_t num_shards() const { return options_.num_shards; }
  std::string coordinator_address() const { return coordinator_->address(); }

  v1::Coordinator::Stub& coordinator() { return *coordinator_stub_; }
  v1::ParameterServer::Stub& server(uint32_t k) { return *server_stubs_[k]; }
  CoordinatorServer& coordinator_server() { return *coordinator_; }
  ParameterServer& server_object(uint32_t k) { return *servers_[k]; }
  ShardService& service(uint32_t k) { return servers_[k]->service(); }

  // RPC helpers with a 10 s deadline; they return the gRPC status. Requests
  // for a shard id that is not one of ours go to server 0, which is how the
  // wrong-shard cases are exercised.
  grpc::Status Join(uint64_t total_elements, v1::JoinResponse* out);
  grpc::Status Leave(uint64_t worker_id);
  grpc::Status Heartbeat(uint64_t worker_id);
  grpc::Status InitShard(uint32_t shard, uint64_t worker, const v1::Payload& params);
  grpc::Status Push(uint32_t shard, uint64_t worker, uint64_t step, const v1::Payload& gradient,
                    v1::PushResponse* out = nullptr);
  // The same push as ParameterServer.PushStream, in chunks of at most
  // `chunk_bytes` data bytes (SendPushInChunks, as workers send it).
  grpc::Status PushInChunks(uint32_t shard, uint64_t worker, uint64_t step,
                            const v1::Payload& gradient, size_t chunk_bytes,
                            v1::PushResponse* out = nullptr);
  grpc::Status Pull(const v1::PullRequest& req, v1::PullResponse* out);
  grpc::Status ShardStatus(uint32_t shard, v1::ShardStatusResponse* out);
  // Pulls shard `k` in fp32 (want_full), waiting up to `wait_ms` for
  // `min_version`.
  grpc::Status PullFull(uint32_t shard, uint64_t min_version, uint32_t wait_ms,
                        v1::PullResponse* out);

  // The shard's range as published by the coordinator.
  ShardRange Range(uint32_t shard);
  // A copy of shard `shard`'s optimizer state (params, m, v, version).
  ShardStore Snapshot(uint32_t shard);
  // Waits until every shard holds exactly `pushes` pushes for its open step;
  // bounded by `timeout`. False on timeout.
  bool WaitForPendingPushes(uint32_t pushes, std::chrono::milliseconds timeout);

 private:
  v1::ParameterServer::Stub& StubFor(uint32_t shard);

  ClusterOptions options_;
  std::unique_ptr<CoordinatorServer> coordinator_;
  std::vector<std::unique_ptr<ParameterServer>> servers_;
  std::unique_ptr<v1::Coordinator::Stub> coordinator_stub_;
  std::vector<std::shared_ptr<grpc::Channel>> server_channels_;  // one per server, as stubs
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> server_stubs_;
};

}  // namespace loco::test

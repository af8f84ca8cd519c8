// LocalCluster: a coordinator and S parameter servers inside the test
// process, on 127.0.0.1 with ports chosen by the kernel, for driving real
// loco::Worker objects against the real gRPC surface.
//
// Not thread-safe: set up, query and tear down from the test's main thread;
// the servers themselves are thread-safe and serve the workers' threads.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proto/loco.grpc.pb.h"
#include "server/coordinator_server.h"
#include "server/parameter_server.h"
#include "server/shard_store.h"

namespace loco::test {

struct LocalClusterOptions {
  uint32_t num_servers = 1;
  uint32_t shard_align = 4096;
  // Long enough that no worker expires during a test: departures in these
  // tests are explicit Leave calls, never missed heartbeats.
  std::chrono::milliseconds heartbeat_timeout{30000};
  std::chrono::milliseconds heartbeat_interval{200};
  // How often a server with pending pushes re-asks for the live participants.
  std::chrono::milliseconds step_poll{20};
  ShardServiceOptions shard;  // shard_id is set per server
};

class LocalCluster {
 public:
  explicit LocalCluster(LocalClusterOptions options);
  // Shuts the servers down (bounded: about a second each).
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Starts the coordinator and the servers and waits (at most 5 s) until
  // every server registered.
  ::testing::AssertionResult Start();

  std::string coordinator_address() const { return coordinator_->address(); }
  uint32_t num_servers() const { return options_.num_servers; }

  // loco.v1.ParameterServer/ShardStatus over gRPC (10 s deadline).
  ::testing::AssertionResult ShardStatus(uint32_t shard, v1::ShardStatusResponse* out);
  // A copy of shard `shard`'s optimizer state (params, m, v, version).
  ShardStore Snapshot(uint32_t shard);
  // Waits until every shard holds exactly `pushes` pushes for its open step;
  // bounded by `timeout`. False on timeout.
  bool WaitForPendingPushes(uint32_t pushes, std::chrono::milliseconds timeout);

 private:
  LocalClusterOptions options_;
  std::unique_ptr<CoordinatorServer> coordinator_;
  std::vector<std::unique_ptr<ParameterServer>> servers_;
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs_;
};

}  // namespace loco::test

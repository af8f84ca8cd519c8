// A coordinator restarted with an empty memory on the same port (kill -9
// and a Deployment's restart): the servers' keepalive registration teaches
// it the shard map again, so a worker can join the restarted coordinator
// and receives the parameters the servers kept. With the keepalive off
// (what the servers did before), the restarted coordinator's view never
// becomes ready and the join times out. In-process, over loopback gRPC.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "client/worker.h"
#include "server/coordinator/coordinator_server.h"
#include "server/parameter_server.h"

namespace loco {
namespace {

using std::chrono::milliseconds;

constexpr size_t kElements = 1000;

CoordinatorServerOptions CoordinatorOn(int port) {
  CoordinatorServerOptions o;
  o.security = TransportSecurityOptions::Insecure();  // loopback
  o.port = port;
  o.coordinator.membership.num_shards = 2;
  o.coordinator.membership.shard_align = 128;
  o.coordinator.heartbeat_interval = milliseconds(200);
  return o;
}

WorkerOptions WorkerFor(const std::string& coordinator) {
  WorkerOptions o;
  o.security = TransportSecurityOptions::Insecure();
  o.coordinator = coordinator;
  o.codec = PushCodec::kFp32;
  o.block_size = 128;
  o.rpc_timeout_ms = 2000;
  o.join_timeout_ms = 3000;
  o.max_retries = 2;
  return o;
}

// One coordinator and two servers (keepalive every `reregister`); a worker
// steps once; the coordinator is replaced by a fresh one on its port; a
// second worker tries to join it. Returns the second worker's Join status
// and, when it joined, the parameters it received.
struct RestartOutcome {
  Status joined;
  std::vector<float> before, received;
  uint64_t version = 0;
};

RestartOutcome RestartCoordinatorAndJoin(milliseconds reregister) {
  RestartOutcome out;
  auto first = std::make_unique<CoordinatorServer>(CoordinatorOn(0));
  auto port = first->Start();
  EXPECT_TRUE(port.ok()) << port.status().ToString();
  const std::string address = first->address();
  std::vector<std::unique_ptr<ParameterServer>> servers;
  for (uint32_t k = 0; k < 2; ++k) {
    ParameterServerOptions po;
    po.security = TransportSecurityOptions::Insecure();
    po.coordinator = address;
    po.num_servers = 2;
    po.shard.shard_id = k;
    po.shard.return_path.codec = PullCodec::kFp32;
    po.reregister_interval = reregister;
    servers.push_back(std::make_unique<ParameterServer>(po));
    EXPECT_TRUE(servers.back()->Start().ok());
  }
  {
    auto w = Worker::Connect(WorkerFor(address));
    EXPECT_TRUE(w.ok());
    EXPECT_TRUE((*w)->Join(kElements).ok());
    std::vector<float> init(kElements, 0.5f), grads(kElements, 0.1f);
    EXPECT_TRUE((*w)->InitParameters(init, &out.before).ok());
    auto r = (*w)->Step(grads, &out.before);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE((*w)->Leave().ok());
  }
  first->Shutdown(milliseconds(200));  // its memory is gone
  first.reset();
  CoordinatorServer second(CoordinatorOn(*port));
  auto again = second.Start();
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  {
    auto w = Worker::Connect(WorkerFor(address));
    EXPECT_TRUE(w.ok());
    out.joined = (*w)->Join(kElements);
    if (out.joined.ok()) {
      std::vector<float> mine(kElements, -1.0f);
      EXPECT_TRUE((*w)->InitParameters(mine, &out.received).ok());
      out.version = (*w)->step();
      EXPECT_TRUE((*w)->Leave().ok());
    }
  }
  for (auto& s : servers) s->Shutdown(milliseconds(200));
  second.Shutdown(milliseconds(200));
  return out;
}

TEST(CoordinatorRestart, ServersRegisterAgainSoAWorkerJoinsTheRestartedCoordinator) {
  const RestartOutcome out = RestartCoordinatorAndJoin(milliseconds(100));
  ASSERT_TRUE(out.joined.ok()) << out.joined.ToString();
  EXPECT_EQ(out.version, 1u) << "the servers' version survives the coordinator";
  EXPECT_EQ(out.received, out.before) << "the worker received the servers' parameters";
}

TEST(CoordinatorRestart, WithoutTheKeepaliveTheRestartedCoordinatorNeverGetsReady) {
  const RestartOutcome out = RestartCoordinatorAndJoin(milliseconds(0));
  EXPECT_EQ(out.joined.code(), StatusCode::kDeadlineExceeded) << out.joined.ToString();
}

}  // namespace
}  // namespace loco

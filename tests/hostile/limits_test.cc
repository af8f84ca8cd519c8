// Resource limits: a flood of calls that each hold a server thread (pulls
// waiting for a version that does not come) cannot take more threads than
// --max-server-threads; the calls beyond get RESOURCE_EXHAUSTED at once, and
// the server serves normally afterwards. The same flood under the default
// limit is served without a refusal (the control: the refusals come from the
// limit, not from the flood itself).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "server/parameter_server.h"
#include "tests/cluster/test_cluster.h"
#include "tests/server/reference.h"

namespace loco::test {
namespace {

constexpr uint64_t kTotal = 1000;
constexpr int kFlood = 24;

struct FloodResult {
  int exhausted = 0;
  int other = 0;
  bool served_after = false;
};

FloodResult FloodWithWaitingPulls(int max_threads) {
  FloodResult result;
  TestCluster c(ClusterOptions{});
  EXPECT_TRUE(c.Start());
  ParameterServerOptions so;
  so.coordinator = c.coordinator_address();
  so.security = TransportSecurityOptions::Insecure();
  so.max_threads = max_threads;
  ParameterServer server(so);  // shard 0 again: the test talks to it directly
  EXPECT_TRUE(server.Start().ok());
  v1::JoinResponse join;
  EXPECT_TRUE(c.Join(kTotal, &join).ok());
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::ParameterServer::NewStub(channel);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::InitShardRequest init;
    init.set_worker_id(join.worker_id());
    *init.mutable_params() = Fp32Payload(RandomVector(kTotal, 3), 0);
    v1::InitShardResponse resp;
    EXPECT_TRUE(stub->InitShard(&ctx, init, &resp).ok());
  }
  // Every pull asks for version 1, which never comes (nobody pushes), so
  // each holds a server thread for its whole wait (1.5 s, bounded).
  std::atomic<int> exhausted{0}, other{0};
  std::vector<std::thread> flood;
  for (int i = 0; i < kFlood; ++i) {
    flood.emplace_back([&] {
      // One channel per caller: the per-connection stream cap does not
      // queue them, so every call reaches the server at once.
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      auto own = v1::ParameterServer::NewStub(grpc::CreateCustomChannel(
          server.address(), grpc::InsecureChannelCredentials(), args));
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      v1::PullRequest req;
      req.set_worker_id(join.worker_id());
      req.set_min_version(1);
      req.set_wait_ms(1500);
      req.set_have_any(true);
      v1::PullResponse resp;
      grpc::Status s = own->Pull(&ctx, req, &resp);
      if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        ++exhausted;
      } else {
        ++other;
      }
    });
  }
  for (auto& t : flood) t.join();
  result.exhausted = exhausted.load();
  result.other = other.load();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ShardStatusRequest status;
  v1::ShardStatusResponse status_resp;
  result.served_after = stub->ShardStatus(&ctx, status, &status_resp).ok() &&
                        status_resp.initialized() && status_resp.version() == 0;
  server.Shutdown(std::chrono::milliseconds(200));
  return result;
}

TEST(ServerLimits, ThreadCapRefusesTheFloodBeyondItAndTheServerCarriesOn) {
  const FloodResult capped = FloodWithWaitingPulls(/*max_threads=*/4);
  EXPECT_GT(capped.exhausted, 0) << "no call was refused under a 4-thread cap";
  EXPECT_EQ(capped.exhausted + capped.other, kFlood);
  EXPECT_TRUE(capped.served_after);
}

TEST(ServerLimits, TheSameFloodUnderTheDefaultCapIsServed) {
  const FloodResult open = FloodWithWaitingPulls(ParameterServerOptions{}.max_threads);
  EXPECT_EQ(open.exhausted, 0);
  EXPECT_EQ(open.other, kFlood);
  EXPECT_TRUE(open.served_after);
}

}  // namespace
}  // namespace loco::test

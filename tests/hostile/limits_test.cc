// Resource limits: a flood of calls that each hold a server thread (pulls
// waiting for a version that does not come) cannot take more threads than
// --max-server-threads; the calls beyond get RESOURCE_EXHAUSTED at once, and
// the server serves normally afterwards. The same flood under the default
// limit is served without a refusal (the control: the refusals come from the
// limit, not from the flood itself). The smallest per-call HTTP/2 window
// still carries shard-sized messages both ways, and a window out of range
// is refused.
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

constexpr uint64_t kLimitsTotal = 1000;
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
  EXPECT_TRUE(c.Join(kLimitsTotal, &join).ok());
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::ParameterServer::NewStub(channel);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::InitShardRequest init;
    init.set_worker_id(join.worker_id());
    *init.mutable_params() = Fp32Payload(RandomVector(kLimitsTotal, 3), 0);
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

TEST(ServerLimits, TheSmallestStreamWindowCarriesShardSizedPushesAndBadWindowsAreRefused) {
  ParameterServerOptions bad;
  bad.coordinator = "127.0.0.1:1";
  bad.security = TransportSecurityOptions::Insecure();
  for (const int window : {1000, (64 << 10) - 1, (1 << 30) + 1}) {
    bad.stream_window_bytes = window;
    const Status refused = ParameterServer::ValidateOptions(bad);
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << window;
    EXPECT_NE(refused.message().find("--stream-window-kb"), std::string::npos)
        << refused.ToString();
  }
  bad.stream_window_bytes = 0;  // gRPC's adaptive window
  EXPECT_TRUE(ParameterServer::ValidateOptions(bad).ok());

  // 512 Ki elements: 2 MiB fp32 messages (under the test client's 4 MB
  // limit), 32 times the window.
  constexpr uint64_t kN = 1 << 19;
  ClusterOptions o;
  o.stream_window_bytes = 64 << 10;
  o.shard.hyper.lr = 1e-2f;
  o.shard.return_path.codec = PullCodec::kFp32;
  TestCluster c(o);
  ASSERT_TRUE(c.Start());
  v1::JoinResponse a, b;
  ASSERT_TRUE(c.Join(kN, &a).ok());
  ASSERT_TRUE(c.Join(kN, &b).ok());
  const std::vector<float> init = RandomVector(kN, 1);
  ASSERT_TRUE(c.InitShard(0, a.worker_id(), Fp32Payload(init, 0)).ok());
  const std::vector<float> ga = RandomVector(kN, 2, 0.1f), gb = RandomVector(kN, 3, 0.1f);
  ASSERT_TRUE(c.Push(0, a.worker_id(), 0, Fp32Payload(ga, 0)).ok());
  ASSERT_TRUE(c.PushInChunks(0, b.worker_id(), 0, Fp32Payload(gb, 0), 256 << 10).ok());
  ReferenceAdamW ref(init, o.shard.hyper);
  std::vector<double> mean(kN);
  for (size_t i = 0; i < kN; ++i) mean[i] = (double{ga[i]} + gb[i]) / 2;
  ref.Step(mean);
  v1::PullResponse pulled;
  ASSERT_TRUE(c.PullFull(0, 1, 5000, &pulled).ok());
  EXPECT_TRUE(AllNear(FloatsOf(pulled.params().data()), ref.params(), 1e-5));
}

}  // namespace
}  // namespace loco::test

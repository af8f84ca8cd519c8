// ChannelPoller in a process without a gRPC server, as loco-worker is: a
// real loco-coordinator process is SIGKILLed and started again on its
// port, and fail-fast calls every 50 ms must reach it again within 3 s of
// its start (the channel's reconnect backoff is capped at 1 s). The poller
// watches the channel and polls only while it reconnects. Without a
// thread polling, gRPC completes the reconnection only at its backup
// poller's 5-s ticks: measured 6 s, and this test fails.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/channel_poller.h"
#include "launch/child_process.h"
#include "launch/local_prometheus.h"
#include "proto/loco.grpc.pb.h"
#include "rpc/reconnect_backoff.h"

namespace loco {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

std::unique_ptr<ChildProcess> StartCoordinator(int port, const std::string& log) {
  auto child = std::make_unique<ChildProcess>(
      "coordinator",
      std::vector<std::string>{std::string(LOCO_BIN_DIR) + "/loco-coordinator",
                               "--port=" + std::to_string(port), "--insecure",
                               "--num-servers=1"},
      log);
  EXPECT_TRUE(child->Start().ok());
  return child;
}

// Seconds until a fail-fast GetClusterView succeeds, calling every 50 ms,
// at most `limit`; -1 when none did.
double SecondsUntilAnswered(v1::Coordinator::Stub* stub, milliseconds limit) {
  const Clock::time_point start = Clock::now();
  while (Clock::now() - start < limit) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(1000));
    v1::GetClusterViewRequest req;
    v1::ClusterView view;
    if (stub->GetClusterView(&ctx, req, &view).ok()) {
      return std::chrono::duration<double>(Clock::now() - start).count();
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  return -1.0;
}

TEST(ChannelPoller, AClientOnlyProcessReachesARestartedPeerWithinItsBackoff) {
  auto port = LocalPrometheus::PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  const std::string log = ::testing::TempDir() + "/channel-poller-coordinator.log";
  ChannelPoller poller;
  grpc::ChannelArguments args;
  SetReconnectBackoff(&args, 1000);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(*port),
                                          grpc::InsecureChannelCredentials(), args);
  poller.Watch(channel);
  auto stub = v1::Coordinator::NewStub(channel);

  auto coordinator = StartCoordinator(*port, log);
  ASSERT_GE(SecondsUntilAnswered(stub.get(), milliseconds(20000)), 0.0)
      << coordinator->LogTail(20);

  coordinator->Signal(SIGKILL);
  coordinator->Stop(2000);  // reaps it
  // Calls while it is away fail and leave the channel in transient failure.
  EXPECT_LT(SecondsUntilAnswered(stub.get(), milliseconds(1000)), 0.0);
  coordinator = StartCoordinator(*port, log + ".restart");
  const double seconds = SecondsUntilAnswered(stub.get(), milliseconds(15000));
  std::printf("answered %.2f s after the restart\n", seconds);
  EXPECT_GE(seconds, 0.0) << "never answered";
  EXPECT_LT(seconds, 3.0) << "the channel reconnected only after " << seconds << " s";
  coordinator->Stop(2000);
}

}  // namespace
}  // namespace loco

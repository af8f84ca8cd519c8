// Shutdown is bounded: a pull waiting for a version that never comes is
// released when the server shuts down.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "tests/cluster/test_cluster.h"
#include "tests/server/reference.h"

namespace loco::test {
namespace {

TEST(Lifecycle, ShutdownReleasesWaitingPulls) {
  ClusterOptions o;
  TestCluster c(o);
  ASSERT_TRUE(c.Start());
  v1::JoinResponse join;
  ASSERT_TRUE(c.Join(256, &join).ok());
  ASSERT_TRUE(c.InitShard(0, join.worker_id(), Fp32Payload(RandomVector(256, 1), 0)).ok());
  auto waiting = std::async(std::launch::async, [&c] {
    v1::PullResponse resp;
    return c.PullFull(0, 5, 8000, &resp).error_code();  // version 5 never comes
  });
  // Give the pull time to reach the server; if it arrives later it is refused
  // as UNAVAILABLE, which this test accepts too.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  c.server_object(0).Shutdown(std::chrono::milliseconds(500));
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "a waiting pull outlived the server's shutdown";
  const auto code = waiting.get();
  EXPECT_TRUE(code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::CANCELLED)
      << "code " << code;
}

}  // namespace
}  // namespace loco::test

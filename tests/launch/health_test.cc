// Every server process answers the standard gRPC health check (what a
// Kubernetes gRPC probe asks): the real loco-coordinator and loco-server
// binaries on loopback.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "health.grpc.pb.h"
#include "launch/child_process.h"

namespace loco {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

std::string Tmp(const std::string& name) {
  return std::string(::testing::TempDir()) + "/" + name + "." + std::to_string(::getpid());
}

// Starts `argv`, waits for its "LISTENING host:port" line, returns the address.
std::string StartAndListen(ChildProcess& c) {
  if (!c.Start().ok()) return "";
  for (int i = 0; i < 60; ++i) {
    auto line = c.WaitLine(500);
    if (line && line->rfind("LISTENING ", 0) == 0) return line->substr(10);
    if (c.Poll()) return "";
  }
  return "";
}

HealthCheckResponse::ServingStatus Check(const std::string& address, const std::string& service,
                                         grpc::StatusCode* code) {
  auto stub = Health::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  HealthCheckRequest req;
  req.set_service(service);
  HealthCheckResponse resp;
  *code = stub->Check(&ctx, req, &resp).error_code();
  return resp.status();
}

TEST(Health, CoordinatorAndServerReportServing) {
  ChildProcess coord("coordinator", {std::string(LOCO_BIN_DIR) + "/loco-coordinator", "--port=0", "--insecure",
                                     "--num-servers=1"},
                     Tmp("health-coordinator.log"));
  const std::string coord_addr = StartAndListen(coord);
  ASSERT_FALSE(coord_addr.empty()) << coord.LogTail(10);
  ChildProcess server("server", {std::string(LOCO_BIN_DIR) + "/loco-server", "--port=0", "--insecure",
                                 "--shard-id=0", "--num-servers=1", "--coordinator=" + coord_addr},
                      Tmp("health-server.log"));
  const std::string server_addr = StartAndListen(server);
  ASSERT_FALSE(server_addr.empty()) << server.LogTail(10);

  for (const std::string& addr : {coord_addr, server_addr}) {
    grpc::StatusCode code;
    EXPECT_EQ(Check(addr, "", &code), HealthCheckResponse::SERVING) << addr;
    EXPECT_EQ(code, grpc::StatusCode::OK) << addr;
    // An unknown service name is NOT_FOUND, as the protocol says.
    Check(addr, "no.such.Service", &code);
    EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND) << addr;
  }
  server.Stop(10000);
  coord.Stop(10000);
  EXPECT_EQ(server.exit_code(), 0) << server.LogTail(10);
  EXPECT_EQ(coord.exit_code(), 0) << coord.LogTail(10);
}

// Readiness: a coordinator reports loco.v1.Coordinator NOT_SERVING while it
// recovers (here: until its one shard's server registered; after a restart,
// until the servers and the open step's workers are back), while the
// overall status that liveness probes ask for stays SERVING.
TEST(Health, TheCoordinatorIsNotReadyUntilItHasRecovered) {
  ChildProcess coord("coordinator", {std::string(LOCO_BIN_DIR) + "/loco-coordinator", "--port=0",
                                     "--insecure", "--num-servers=1"},
                     Tmp("ready-coordinator.log"));
  const std::string coord_addr = StartAndListen(coord);
  ASSERT_FALSE(coord_addr.empty()) << coord.LogTail(10);
  grpc::StatusCode code;
  EXPECT_EQ(Check(coord_addr, "loco.v1.Coordinator", &code), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Check(coord_addr, "", &code), HealthCheckResponse::SERVING);
  ChildProcess server("server", {std::string(LOCO_BIN_DIR) + "/loco-server", "--port=0",
                                 "--insecure", "--shard-id=0", "--num-servers=1",
                                 "--coordinator=" + coord_addr},
                      Tmp("ready-server.log"));
  ASSERT_FALSE(StartAndListen(server).empty()) << server.LogTail(10);
  bool ready = false;
  for (int i = 0; i < 100 && !ready; ++i) {  // at most 10 s
    ready = Check(coord_addr, "loco.v1.Coordinator", &code) == HealthCheckResponse::SERVING;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(ready) << coord.LogTail(10);
  server.Stop(10000);
  coord.Stop(10000);
}

}  // namespace
}  // namespace loco

// A server started on a port that is already taken fails to start, rather
// than sharing the port with the first one (gRPC's default SO_REUSEPORT
// would let both bind, and the kernel would split the clients between
// them). Real gRPC servers on loopback.
#include <gtest/gtest.h>

#include <chrono>

#include "proto/loco.grpc.pb.h"
#include "rpc/grpc_server_start.h"
#include "security/transport_security.h"
#include "server/coordinator/coordinator_server.h"
#include "tests/common/loopback_listener.h"

namespace loco::test {
namespace {

GrpcServerOptions PlaintextOn(int port) {
  auto security = TransportSecurity::Load(TransportSecurityOptions::Insecure(),
                                          TransportRole::kServer);
  EXPECT_TRUE(security.ok()) << security.status().ToString();
  GrpcListenOptions listen;
  listen.port = port;
  return MakeGrpcServerOptions(listen, "test", security.ok() ? *security : nullptr, nullptr);
}

// gRPC starts no server without a service of its own; every method of
// this one answers UNIMPLEMENTED.
class IdleService : public v1::Coordinator::Service {};

TEST(PortTaken, ASecondGrpcServerOnTheSamePortFailsToStart) {
  IdleService service;
  auto first = StartGrpcServer(PlaintextOn(0), {&service});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const int port = first->port;
  ASSERT_GT(port, 0);
  auto second = StartGrpcServer(PlaintextOn(port), {&service});
  EXPECT_FALSE(second.ok()) << "two servers both listen on port " << port;
  if (!second.ok()) {
    EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().ToString();
    EXPECT_NE(second.status().message().find("address in use"), std::string::npos)
        << second.status().ToString();
  } else {
    second->Shutdown(std::chrono::milliseconds(0));
  }
  first->Shutdown(std::chrono::milliseconds(0));
  // Once the first has let go, the port can be served again.
  auto again = StartGrpcServer(PlaintextOn(port), {&service});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->port, port);
  again->Shutdown(std::chrono::milliseconds(0));
}

TEST(PortTaken, AHealthPortThatIsTakenFailsTheStart) {
  IdleService service;
  auto first = StartGrpcServer(PlaintextOn(0), {&service});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  GrpcServerOptions options = PlaintextOn(0);
  options.health_port = first->port;
  auto second = StartGrpcServer(options, {&service});
  ASSERT_FALSE(second.ok()) << "the health port " << first->port << " was shared";
  EXPECT_NE(second.status().message().find("health port"), std::string::npos)
      << second.status().ToString();
  first->Shutdown(std::chrono::milliseconds(0));
}

TEST(PortTaken, ACoordinatorOnAPortAnotherProcessListensOnRefusesToStart) {
  // A plain socket listening with SO_REUSEPORT set, as another gRPC server
  // of the same user would: without the fix the coordinator could join it.
  LoopbackListener taken(/*reuse_port=*/true);
  const int port = taken.port();
  ASSERT_GT(port, 0);

  CoordinatorServerOptions o;
  o.port = port;
  o.coordinator.membership.num_shards = 1;
  o.security = TransportSecurityOptions::Insecure();
  CoordinatorServer coordinator(o);
  auto started = coordinator.Start();
  EXPECT_FALSE(started.ok()) << "the coordinator started on taken port " << port;
  if (!started.ok()) {
    EXPECT_NE(started.status().message().find(std::to_string(port)), std::string::npos)
        << started.status().ToString();
  } else {
    coordinator.Shutdown(std::chrono::milliseconds(0));
  }
}

}  // namespace
}  // namespace loco::test

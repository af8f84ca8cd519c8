// CoordinatorServer: owns the coordinator's gRPC server (Coordinator service
// plus the standard health service). No globals: a test may run several in
// one process.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "server/coordinator_service.h"
#include "server/grpc_server_start.h"

namespace loco {

struct CoordinatorServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 = any free port
  int max_message_mb = 16;
  CoordinatorOptions coordinator;
};

class CoordinatorServer {
 public:
  // `clock` is for tests (defaults to steady_clock).
  explicit CoordinatorServer(CoordinatorServerOptions options, Membership::Clock clock = nullptr);
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  // Validates the options, binds and starts serving; returns the bound port.
  StatusOr<int> Start();
  // Stops accepting calls; in-flight calls get until `deadline`, then are
  // cancelled. Idempotent.
  void Shutdown(std::chrono::milliseconds deadline = std::chrono::milliseconds(2000));
  // "host:port" once started.
  std::string address() const { return JoinHostPort(options_.host, port_); }

 private:
  CoordinatorServerOptions options_;
  CoordinatorService service_;
  GrpcServerHandle grpc_;
  int port_ = 0;
};

}  // namespace loco

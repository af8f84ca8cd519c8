// CoordinatorServer: owns the coordinator's gRPC server (Coordinator service
// plus the standard health service). No globals: a test may run several in
// one process.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <optional>
#include <string>

#include <prometheus/registry.h>

#include "common/status.h"
#include "metrics/metrics_endpoint.h"
#include "server/coordinator/coordinator_metrics.h"
#include "server/coordinator/coordinator_service.h"
#include "rpc/grpc_server_start.h"

namespace loco {

// Where the coordinator listens and its gRPC limits are GrpcListenOptions'
// fields (host, port, max_message_mb, health_port, ...).
struct CoordinatorServerOptions : GrpcListenOptions {
  CoordinatorOptions coordinator;  // its `metrics` is set by CoordinatorServer
  MetricsEndpointOptions metrics;  // /metrics; off unless enabled
  // How the port is secured (default: neither TLS nor plaintext, which
  // Start() refuses). Refused calls are counted in loco_auth_rejected_total.
  TransportSecurityOptions security;
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
  // The bound /metrics port once started with metrics enabled; 0 otherwise.
  int metrics_port() const { return metrics_endpoint_ ? metrics_endpoint_->port() : 0; }
  // The bound health-only port once started with one; 0 otherwise.
  int health_port() const { return grpc_.health_port; }
  // Calls refused for their token (lives as long as *this).
  const AuthRejections& auth_rejections() const { return *auth_rejections_; }
  prometheus::Registry& metrics_registry() { return *registry_; }

 private:
  // Reports loco.v1.Coordinator NOT_SERVING while the membership recovers
  // after a restart (a readiness probe for that service sees it), and
  // SERVING once it has; runs on recovery_watch_ until then or Shutdown.
  void WatchRecovery();

  CoordinatorServerOptions options_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::shared_ptr<AuthRejections> auth_rejections_;
  CoordinatorService service_;
  GrpcServerHandle grpc_;
  int port_ = 0;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;  // after service_: stops first
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stopping_ = false;
  std::thread recovery_watch_;
};

}  // namespace loco

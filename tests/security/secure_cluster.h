// SecureCluster: a coordinator and one parameter server in the test process,
// on 127.0.0.1 with kernel-chosen ports, started through the production
// path (CoordinatorServer / ParameterServer -> StartGrpcServer) with the
// given transport security, plus /metrics on loopback and a plaintext
// health port each. Clients are made with TransportSecurity like the
// worker's, so tests choose what the caller presents.
//
// Not thread-safe: set up, query and tear down from the test's thread.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "client/worker.h"
#include "common/transport_security_options.h"
#include "proto/loco.grpc.pb.h"
#include "server/coordinator/coordinator_server.h"
#include "server/parameter_server.h"

namespace loco::test {

inline constexpr uint32_t kShardAlign = 128;

class SecureCluster {
 public:
  explicit SecureCluster(TransportSecurityOptions server_security);
  ~SecureCluster();

  // The coordinator's --max-workers (before Start).
  void SetMaxWorkers(size_t max_workers) { max_workers_ = max_workers; }
  // The server's keepalive registration interval (before Start).
  void SetReregisterInterval(std::chrono::milliseconds interval) { reregister_ = interval; }
  // The coordinator's own security, when it differs from the server's
  // (before Start).
  void SetCoordinatorSecurity(TransportSecurityOptions security) {
    coordinator_security_ = std::move(security);
  }

  // Starts both and waits (at most 5 s) until the server registered.
  ::testing::AssertionResult Start();
  // Replaces the coordinator by a fresh one (an empty memory, a new random
  // ticket key, a newer incarnation) on the same port, as a restarted pod
  // without a kept key; the server registers with it at its next keepalive.
  ::testing::AssertionResult RestartCoordinator();

  std::string coordinator_address() const { return coordinator_->address(); }
  // Options for a real Worker of this cluster that trains fp32 steps with
  // generous timeouts, presenting `security`.
  WorkerOptions WorkerFor(TransportSecurityOptions security) const;
  std::string server_address() const { return server_->address(); }
  CoordinatorServer& coordinator() { return *coordinator_; }
  ParameterServer& server() { return *server_; }

  // A client channel secured by `client` (validated; fails the test if not).
  static std::shared_ptr<grpc::Channel> Channel(const std::string& address,
                                                const TransportSecurityOptions& client);

 private:
  TransportSecurityOptions security_;
  std::optional<TransportSecurityOptions> coordinator_security_;
  std::chrono::milliseconds reregister_ = ParameterServerOptions().reregister_interval;
  size_t max_workers_ = MembershipOptions().max_workers;
  CoordinatorServerOptions coordinator_options_;  // set by Start
  std::unique_ptr<CoordinatorServer> coordinator_;
  std::unique_ptr<ParameterServer> server_;
};

// Scrapes http://127.0.0.1:port/metrics and returns the sum of
// loco_auth_rejected_total{reason=...}; -1 when the scrape fails.
double ScrapeRejections(int metrics_port, const std::string& reason);

// A 5 s deadline for raw calls.
void SetTestDeadline(grpc::ClientContext* ctx);

}  // namespace loco::test

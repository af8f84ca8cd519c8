#include "tests/security/secure_cluster.h"

#include <chrono>
#include <thread>

#include "security/transport_security.h"
#include "tests/metrics/http_get.h"
#include "tests/metrics/prom_text.h"

namespace loco::test {

SecureCluster::SecureCluster(TransportSecurityOptions server_security)
    : security_(std::move(server_security)) {}

SecureCluster::~SecureCluster() {
  if (server_) server_->Shutdown(std::chrono::milliseconds(200));
  if (coordinator_) coordinator_->Shutdown(std::chrono::milliseconds(200));
}

::testing::AssertionResult SecureCluster::Start() {
  CoordinatorServerOptions co;
  co.coordinator.membership.num_shards = 1;
  co.coordinator.membership.shard_align = kShardAlign;
  co.coordinator.membership.heartbeat_timeout = std::chrono::milliseconds(10000);
  co.coordinator.heartbeat_interval = std::chrono::milliseconds(100);
  co.coordinator.membership.max_workers = max_workers_;
  co.metrics.enabled = true;
  co.security = coordinator_security_.value_or(security_);
  co.health_port = 0;
  coordinator_ = std::make_unique<CoordinatorServer>(co);
  auto cp = coordinator_->Start();
  if (!cp.ok()) return ::testing::AssertionFailure() << "coordinator: " << cp.status().ToString();
  coordinator_options_ = co;
  coordinator_options_.port = *cp;

  ParameterServerOptions so;
  so.coordinator = coordinator_->address();
  so.num_servers = 1;
  so.step_poll = std::chrono::milliseconds(20);
  so.reregister_interval = reregister_;
  so.shard.return_path.codec = PullCodec::kFp32;
  so.metrics.enabled = true;
  so.health_port = 0;
  // The server is also the coordinator's client: it presents the same
  // certificate and token, and verifies the coordinator against the CA.
  so.security = security_;
  if (!so.security.insecure && so.security.tls_ca.empty()) {
    return ::testing::AssertionFailure() << "a TLS server option set needs tls_ca here";
  }
  server_ = std::make_unique<ParameterServer>(so);
  auto sp = server_->Start();
  if (!sp.ok()) return ::testing::AssertionFailure() << "server: " << sp.status().ToString();
  for (int i = 0; i < 500; ++i) {  // bounded: 500 x 10 ms
    if (server_->registered()) return ::testing::AssertionSuccess();
    if (!server_->fatal_status().ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ::testing::AssertionFailure() << "the server did not register within 5 s: "
                                       << server_->fatal_status().ToString();
}

WorkerOptions SecureCluster::WorkerFor(TransportSecurityOptions security) const {
  WorkerOptions o;
  o.coordinator = coordinator_address();
  o.codec = PushCodec::kFp32;
  o.rpc_timeout_ms = 5000;
  o.step_timeout_ms = 20000;
  o.join_timeout_ms = 20000;
  o.security = std::move(security);
  return o;
}

::testing::AssertionResult SecureCluster::RestartCoordinator() {
  coordinator_->Shutdown(std::chrono::milliseconds(0));
  coordinator_.reset();
  ++coordinator_options_.coordinator.membership.incarnation;  // as a restart's clock or state
  coordinator_ = std::make_unique<CoordinatorServer>(coordinator_options_);
  auto cp = coordinator_->Start();
  if (!cp.ok()) return ::testing::AssertionFailure() << "coordinator: " << cp.status().ToString();
  return ::testing::AssertionSuccess();
}

std::shared_ptr<grpc::Channel> SecureCluster::Channel(const std::string& address,
                                                      const TransportSecurityOptions& client) {
  auto security = TransportSecurity::Load(client, TransportRole::kClient);
  EXPECT_TRUE(security.ok()) << security.status().ToString();
  if (!security.ok()) return nullptr;
  return (*security)->CreateChannel(address, grpc::ChannelArguments());
}

double ScrapeRejections(int metrics_port, const std::string& reason) {
  auto body = HttpGet("127.0.0.1", metrics_port, "/metrics");
  if (!body.ok()) return -1;
  auto parsed = PromText::Parse(*body);
  if (!parsed.ok()) return -1;
  return parsed->Sum("loco_auth_rejected_total", {{"reason", reason}});
}

void SetTestDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace loco::test

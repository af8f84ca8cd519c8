#include "server/coordinator/coordinator_server.h"

#include "common/format_double.h"
#include "common/log.h"
#include "metrics/metrics_endpoint_flags.h"

namespace loco {

namespace {

CoordinatorOptions WithMetrics(CoordinatorOptions o, CoordinatorMetrics* metrics) {
  o.metrics = metrics;
  return o;
}

}  // namespace

CoordinatorServer::CoordinatorServer(CoordinatorServerOptions options, Membership::Clock clock)
    : options_(std::move(options)),
      registry_(std::make_shared<prometheus::Registry>()),
      metrics_(std::make_unique<CoordinatorMetrics>(*registry_)),
      auth_rejections_(std::make_shared<AuthRejections>(
          *registry_, std::map<std::string, std::string>{})),
      service_(WithMetrics(options_.coordinator, metrics_.get()), std::move(clock)) {}

CoordinatorServer::~CoordinatorServer() { Shutdown(std::chrono::milliseconds(0)); }

StatusOr<int> CoordinatorServer::Start() {
  if (grpc_.server) return FailedPrecondition("coordinator already started");
  LOCO_RETURN_IF_ERROR(Membership::ValidateOptions(options_.coordinator.membership));
  if (!(options_.coordinator.max_joins_per_second > 0)) {
    return InvalidArgument("max joins per second (" +
                           FormatDouble(options_.coordinator.max_joins_per_second) +
                           ") must be > 0");
  }
  if (options_.coordinator.heartbeat_interval.count() <= 0 ||
      options_.coordinator.heartbeat_interval >= options_.coordinator.membership.heartbeat_timeout) {
    return InvalidArgument("heartbeat interval (" +
                           std::to_string(options_.coordinator.heartbeat_interval.count()) +
                           " ms) must be > 0 and below the heartbeat timeout (" +
                           std::to_string(options_.coordinator.membership.heartbeat_timeout.count()) +
                           " ms)");
  }
  auto security = TransportSecurity::Load(options_.security, TransportRole::kServer);
  if (!security.ok()) return security.status();
  (*security)->LogStartupWarnings("coordinator");
  auto tickets = options_.coordinator.ticket_key_file.empty()
                     ? WorkerTicketKey::Random()
                     : WorkerTicketKey::FromFile(options_.coordinator.ticket_key_file);
  if (!tickets.ok()) return tickets.status();
  if (options_.coordinator.ticket_key_file.empty() && (*security)->role_policy().separated()) {
    LOG_WARN(
        "coordinator: no --ticket-key-file or --state-dir: worker tickets use a random "
        "key of this process; after a restart every worker must join again");
  }
  service_.ConfigureAccess((*security)->shared_role_policy(), std::move(tickets).value());
  auto started = StartGrpcServer(
      MakeGrpcServerOptions(options_, "loco.v1.Coordinator", *security, auth_rejections_),
      {&service_});
  if (!started.ok()) return started.status();
  grpc_ = std::move(started).value();
  port_ = grpc_.port;
  auto endpoint = StartMetricsEndpointIfEnabled(options_.metrics, registry_,
                                                [this] { service_.RefreshMetrics(); });
  if (!endpoint.ok()) {
    Shutdown(std::chrono::milliseconds(0));
    return endpoint.status();
  }
  metrics_endpoint_ = std::move(endpoint).value();
  if (metrics_endpoint_) LOG_INFO("coordinator metrics on " << metrics_endpoint_->url());
  if (service_.recovering()) {
    grpc_.SetServing("loco.v1.Coordinator", false);
    recovery_watch_ = std::thread([this] { WatchRecovery(); });
  }
  LOG_INFO("coordinator serving on " << address() << " for "
                                     << options_.coordinator.membership.num_shards << " shards, "
                                     << (*security)->Describe()
                                     << (grpc_.health_port > 0
                                             ? ", health port " + std::to_string(grpc_.health_port)
                                             : std::string()));
  return port_;
}

void CoordinatorServer::WatchRecovery() {
  const std::string name = "loco.v1.Coordinator";
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!stopping_) {
    if (!service_.recovering()) {
      grpc_.SetServing(name, true);
      return;
    }
    watch_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

void CoordinatorServer::Shutdown(std::chrono::milliseconds deadline) {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (recovery_watch_.joinable()) recovery_watch_.join();
  metrics_endpoint_.reset();
  grpc_.Shutdown(deadline);
}

}  // namespace loco

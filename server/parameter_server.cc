#include "server/parameter_server.h"

#include "common/log.h"

namespace loco {

ParameterServer::ParameterServer(ParameterServerOptions options)
    : options_(std::move(options)),
      coordinator_(options_.coordinator, options_.coordinator_rpc_timeout),
      service_(options_.shard, &coordinator_) {}

ParameterServer::~ParameterServer() { Shutdown(std::chrono::milliseconds(0)); }

Status ParameterServer::ValidateOptions(const ParameterServerOptions& o) {
  if (o.coordinator.empty()) {
    return InvalidArgument("the coordinator address is empty; expected host:port");
  }
  if (o.num_servers > 0 && o.shard.shard_id >= o.num_servers) {
    return InvalidArgument("shard id " + std::to_string(o.shard.shard_id) + " is out of range for " +
                           std::to_string(o.num_servers) + " servers (ids 0.." +
                           std::to_string(o.num_servers - 1) + ")");
  }
  if (o.step_poll.count() <= 0) return InvalidArgument("step poll period must be > 0 ms");
  if (o.coordinator_rpc_timeout.count() <= 0) {
    return InvalidArgument("coordinator RPC timeout must be > 0 ms");
  }
  return ShardService::ValidateOptions(o.shard);
}

StatusOr<int> ParameterServer::Start() {
  if (grpc_.server) return FailedPrecondition("server already started");
  LOCO_RETURN_IF_ERROR(ValidateOptions(options_));
  auto started = StartGrpcServer(options_.host, options_.port, {&service_},
                                 options_.max_message_mb, {"loco.v1.ParameterServer"});
  if (!started.ok()) return started.status();
  grpc_ = std::move(started).value();
  port_ = grpc_.port;
  advertised_ = options_.advertise_address.empty() ? address() : options_.advertise_address;
  if (options_.advertise_address.empty() &&
      (options_.host == "0.0.0.0" || options_.host == "::" || options_.host == "[::]")) {
    LOG_WARN("listening on a wildcard address; workers cannot reach " << advertised_
             << " (set --advertise-address to this host's reachable host:port)");
  }
  LOG_INFO("shard " << options_.shard.shard_id << " serving on " << address() << " (advertised "
                    << advertised_ << "), coordinator " << options_.coordinator
                    << ", pull codec " << PullCodecName(options_.shard.return_path.codec));
  thread_ = std::thread([this] { BackgroundLoop(); });
  return port_;
}

bool ParameterServer::registered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registered_;
}

Status ParameterServer::fatal_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fatal_;
}

bool ParameterServer::TryRegister(std::chrono::steady_clock::time_point started, bool* done) {
  *done = false;
  auto r = coordinator_.RegisterServer(options_.shard.shard_id, advertised_);
  Status failure;
  if (r.ok()) {
    if (options_.num_servers > 0 && *r != options_.num_servers) {
      failure = FailedPrecondition("the coordinator runs " + std::to_string(*r) +
                                   " shards but this server was told --num-servers=" +
                                   std::to_string(options_.num_servers));
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      registered_ = true;
      *done = true;
      LOG_INFO("shard " << options_.shard.shard_id << " registered as " << advertised_ << " (of "
                        << *r << " shards)");
      return true;
    }
  } else if (r.status().code() == StatusCode::kInvalidArgument) {
    failure = r.status();  // the coordinator refused this shard id: retrying cannot help
  } else if (std::chrono::steady_clock::now() - started > options_.register_timeout) {
    failure = DeadlineExceeded("could not register with the coordinator within " +
                               std::to_string(options_.register_timeout.count()) +
                               " ms: " + r.status().ToString());
  } else {
    LOG_WARN("shard " << options_.shard.shard_id << " not registered yet: "
                      << r.status().ToString() << "; retrying");
    return true;  // transient; retry after backoff (capped at 2 s)
  }
  LOG_ERROR("shard " << options_.shard.shard_id << ": " << failure.ToString());
  std::lock_guard<std::mutex> lock(mu_);
  fatal_ = failure;
  return false;
}

void ParameterServer::BackgroundLoop() {
  const auto started = std::chrono::steady_clock::now();
  std::chrono::milliseconds backoff(100);
  bool registered = false;
  int warnings = 0;
  for (;;) {
    std::chrono::milliseconds wait = options_.step_poll;
    if (!registered) {
      if (!TryRegister(started, &registered)) return;
      if (!registered) {
        wait = backoff;
        backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
      }
    } else if (!service_.range_known()) {
      (void)service_.EnsureRange();  // Unavailable until the first worker joins
    } else {
      Status s = service_.RefreshParticipants();
      // Throttled: a coordinator outage would otherwise log every poll.
      if (!s.ok() && (warnings++ % 100) == 0) {
        LOG_WARN("shard " << options_.shard.shard_id << ": " << s.ToString());
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_cv_.wait_for(lock, wait, [this] { return stop_; })) return;
  }
}

void ParameterServer::Shutdown(std::chrono::milliseconds deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  service_.Stop();
  if (grpc_.server) {
    grpc_.server->Shutdown(std::chrono::system_clock::now() + deadline);
    grpc_.server->Wait();
    grpc_.server.reset();
  }
}

}  // namespace loco

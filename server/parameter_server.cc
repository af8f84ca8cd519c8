#include "server/parameter_server.h"

#include "common/host_port.h"
#include "common/log.h"
#include "metrics/metrics_endpoint_flags.h"
#include "rpc/transport_failure.h"

namespace loco {

namespace {

ShardServiceOptions WithMetrics(ShardServiceOptions o, ServerMetrics* metrics) {
  o.metrics = metrics;
  return o;
}

ShardServiceOptions WithCheckpoints(ShardServiceOptions o, const CheckpointOptions& c,
                                    std::function<void()> on_due) {
  o.checkpoint_every = c.dir.empty() ? 0 : c.every;
  o.on_checkpoint_due = std::move(on_due);
  return o;
}

}  // namespace

ParameterServer::ParameterServer(ParameterServerOptions options)
    : options_(std::move(options)),
      coordinator_(options_.coordinator, options_.coordinator_rpc_timeout),
      registry_(std::make_shared<prometheus::Registry>()),
      metrics_(std::make_unique<ServerMetrics>(*registry_, options_.shard.shard_id)),
      auth_rejections_(std::make_shared<AuthRejections>(
          *registry_,
          std::map<std::string, std::string>{{"shard", std::to_string(options_.shard.shard_id)}})),
      service_(WithCheckpoints(WithMetrics(options_.shard, metrics_.get()), options_.checkpoint,
                               [this] {
                                 std::lock_guard<std::mutex> lock(mu_);
                                 checkpoint_due_ = true;
                                 stop_cv_.notify_all();
                               }),
               &coordinator_),
      checkpointer_(options_.checkpoint) {}

ParameterServer::~ParameterServer() { Shutdown(std::chrono::milliseconds(0)); }

Status ParameterServer::ValidateOptions(const ParameterServerOptions& o) {
  if (o.coordinator.empty()) {
    return InvalidArgument("the coordinator address is empty; expected host:port");
  }
  if (Status usable = CheckHostPort(o.coordinator); !usable.ok()) {
    return InvalidArgument("the coordinator address '" + o.coordinator + "': " + usable.message());
  }
  if (!o.advertise_address.empty()) {
    if (Status usable = CheckHostPort(o.advertise_address); !usable.ok()) {
      return InvalidArgument("the advertised address '" + o.advertise_address +
                             "': " + usable.message());
    }
  }
  if (o.num_servers > 0 && o.shard.shard_id >= o.num_servers) {
    return InvalidArgument("shard id " + std::to_string(o.shard.shard_id) + " is out of range for " +
                           std::to_string(o.num_servers) + " servers (ids 0.." +
                           std::to_string(o.num_servers - 1) + ")");
  }
  if (o.stream_window_bytes != 0 &&
      (o.stream_window_bytes < (64 << 10) || o.stream_window_bytes > (1 << 30))) {
    return InvalidArgument("stream window " + std::to_string(o.stream_window_bytes) +
                           " bytes is invalid; expected 0 (gRPC's adaptive window) or 64 KiB "
                           "to 1 GiB (--stream-window-kb 64 to 1048576)");
  }
  if (o.step_poll.count() <= 0) return InvalidArgument("step poll period must be > 0 ms");
  if (o.coordinator_rpc_timeout.count() <= 0) {
    return InvalidArgument("coordinator RPC timeout must be > 0 ms");
  }
  LOCO_RETURN_IF_ERROR(Checkpointer::ValidateOptions(o.checkpoint));
  LOCO_RETURN_IF_ERROR(
      ValidateTransportSecurityOptions(o.security, TransportRole::kServerAndClient));
  return ShardService::ValidateOptions(o.shard);
}

Status ParameterServer::LoadCheckpoint() {
  if (options_.checkpoint.dir.empty()) return Status::Ok();
  LOCO_RETURN_IF_ERROR(checkpointer_.Prepare());
  std::string path;
  std::optional<ShardCheckpoint> c =
      checkpointer_.LoadNewest(options_.shard.shard_id, &path, nullptr);
  if (!c) {
    LOG_INFO("shard " << options_.shard.shard_id << ": no valid checkpoint in "
                      << options_.checkpoint.dir << "; starting empty (the first worker "
                      << "initialises the shard)");
    return Status::Ok();
  }
  const uint64_t version = c->version;
  LOCO_RETURN_IF_ERROR(service_.RestoreFrom(std::move(*c)).Annotate("restoring " + path));
  restored_version_ = version;
  restored_from_ = path;
  metrics_->OnStepOpened(version);
  LOG_INFO("shard " << options_.shard.shard_id << " resumed from checkpoint " << path
                    << " at version " << version);
  return Status::Ok();
}

void ParameterServer::WriteCheckpoint(const std::optional<ShardCheckpoint>& c, const char* why) {
  if (!c || options_.checkpoint.dir.empty()) return;
  const auto started = std::chrono::steady_clock::now();
  auto written = checkpointer_.Write(*c);
  metrics_->OnCheckpoint(
      written.ok(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (!written.ok()) {
    LOG_ERROR("shard " << options_.shard.shard_id << ": " << why << " checkpoint at version "
                       << c->version << " failed: " << written.status().ToString());
    return;
  }
  LOG_INFO("shard " << options_.shard.shard_id << ": " << why << " checkpoint at version "
                    << c->version << " written to " << *written);
}

StatusOr<int> ParameterServer::Start() {
  if (grpc_.server) return FailedPrecondition("server already started");
  LOCO_RETURN_IF_ERROR(ValidateOptions(options_));
  auto security = TransportSecurity::Load(options_.security, TransportRole::kServerAndClient);
  if (!security.ok()) return security.status();
  LOCO_RETURN_IF_ERROR(LoadCheckpoint());
  (*security)->LogStartupWarnings("shard " + std::to_string(options_.shard.shard_id));
  security_ = *security;
  coordinator_.Connect(**security);
  service_.SetRolePolicy((*security)->shared_role_policy());
  auto started = StartGrpcServer(
      MakeGrpcServerOptions(options_, "loco.v1.ParameterServer", *security, auth_rejections_),
      {&service_});
  if (!started.ok()) return started.status();
  grpc_ = std::move(started).value();
  port_ = grpc_.port;
  auto endpoint = StartMetricsEndpointIfEnabled(options_.metrics, registry_);
  if (!endpoint.ok()) {
    grpc_.Shutdown(std::chrono::milliseconds(0));
    return endpoint.status();
  }
  metrics_endpoint_ = std::move(endpoint).value();
  if (metrics_endpoint_) {
    LOG_INFO("shard " << options_.shard.shard_id << " metrics on " << metrics_endpoint_->url());
  }
  advertised_ = options_.advertise_address.empty() ? address() : options_.advertise_address;
  if (options_.advertise_address.empty() &&
      (options_.host == "0.0.0.0" || options_.host == "::" || options_.host == "[::]")) {
    LOG_WARN("listening on a wildcard address; workers cannot reach " << advertised_
             << " (set --advertise-address to this host's reachable host:port)");
  }
  LOG_INFO("shard " << options_.shard.shard_id << " serving on " << address() << " (advertised "
                    << advertised_ << "), coordinator " << options_.coordinator
                    << ", pull codec " << PullCodecName(options_.shard.return_path.codec)
                    << ", " << options_.shard.apply_threads << " apply thread(s), "
                    << (*security)->Describe()
                    << (grpc_.health_port > 0 ? ", health port " + std::to_string(grpc_.health_port)
                                              : std::string()));
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

std::optional<Status> ParameterServer::FinalRefusal(const Status& refused) {
  switch (refused.code()) {
    case StatusCode::kInvalidArgument:  // the coordinator refused this shard id
      return refused;
    case StatusCode::kFailedPrecondition:  // the model and range this server reported
      if (!restored_version_) return refused;
      return FailedPrecondition(refused.message() + " (this server restored its shard from " +
                                restored_from_ +
                                "; start it with this run's checkpoints, or without any)");
    case StatusCode::kUnauthenticated:   // a token or certificate it does not accept,
    case StatusCode::kPermissionDenied:  // or not for this role or shard
      return Status(refused.code(), refused.message() +
                                        " (the coordinator refused this server's credential: "
                                        "check --server-token-file, or --auth-token-file, or "
                                        "the client certificate, against the coordinator's)");
    case StatusCode::kUnavailable: {  // final where one side's handshake refuses the other
      const TransportFailure failure = ClassifyUnavailable(refused.message());
      if (RetryCannotCure(failure)) {
        return Status(StatusCode::kUnauthenticated,
                      refused.message() + TransportHintSuffix(failure));
      }
      if (failure != TransportFailure::kClosedAtConnect || !security_) return std::nullopt;
      const auto now = std::chrono::steady_clock::now();
      if (last_transport_check_ &&
          now - *last_transport_check_ < TransportSecurity::kRefusalProbeEvery) {
        return std::nullopt;
      }
      last_transport_check_ = now;
      std::optional<std::string> why = security_->RefusalOfThisTransport(refused.message());
      if (!why) return std::nullopt;
      return Status(StatusCode::kUnauthenticated, refused.message() + " (" + *why + ")");
    }
    default:
      return std::nullopt;
  }
}

bool ParameterServer::TryRegister(std::chrono::steady_clock::time_point started, bool* done) {
  *done = false;
  auto r = coordinator_.RegisterServer(RegistrationRequest());
  Status failure;
  if (r.ok()) {
    if (options_.num_servers > 0 && r->num_shards() != options_.num_servers) {
      failure = FailedPrecondition(
          "the coordinator runs " + std::to_string(r->num_shards()) +
          " shards but this server was told --num-servers=" + std::to_string(options_.num_servers));
    } else if (Status keyed = LearnTicketKey(*r); !keyed.ok()) {
      failure = keyed;  // the coordinator's flags disagree with this server's: fatal
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      registered_ = true;
      *done = true;
      LOG_INFO("shard " << options_.shard.shard_id << " registered as " << advertised_ << " (of "
                        << r->num_shards() << " shards)"
                        << (service_.tickets_required() ? "; shard calls need their worker's ticket"
                                                        : ""));
      return true;
    }
  } else if (std::optional<Status> refused = FinalRefusal(r.status())) {
    failure = *std::move(refused);
  } else if (std::chrono::steady_clock::now() - started > options_.register_timeout) {
    failure = DeadlineExceeded("could not register with the coordinator within " +
                               std::to_string(options_.register_timeout.count()) +
                               " ms: " + r.status().ToString());
  } else {
    if (register_log_.ShouldLog(std::chrono::steady_clock::now())) {
      LOG_WARN("shard " << options_.shard.shard_id << " not registered yet: "
                        << r.status().ToString() << TransportHintSuffix(r.status().message())
                        << "; retrying" << register_log_.SinceLastLine("attempts"));
    }
    return true;  // transient; retry after backoff (capped at 2 s)
  }
  LOG_ERROR("shard " << options_.shard.shard_id << ": " << failure.ToString());
  std::lock_guard<std::mutex> lock(mu_);
  fatal_ = failure;
  return false;
}

Status ParameterServer::LearnTicketKey(const v1::RegisterServerResponse& registered) {
  if (registered.ticket_key().empty() && service_.tickets_required()) {
    return FailedPrecondition(
        "this server separates the worker and server roles (--worker-token-file and "
        "--server-token-file, or --tls-client-roles) but the coordinator at " +
        options_.coordinator +
        " sent no worker-ticket key, so it does not separate them: give the coordinator the "
        "same role flags");
  }
  return service_.LearnTicketKey(registered.ticket_key());
}

v1::RegisterServerRequest ParameterServer::RegistrationRequest() const {
  v1::RegisterServerRequest req;
  req.set_shard_id(options_.shard.shard_id);
  req.set_address(advertised_);
  service_.FillRegistration(&req);
  return req;
}

void ParameterServer::Reregister(int* failures) {
  auto r = coordinator_.RegisterServer(RegistrationRequest());
  if (r.ok()) {
    if (*failures > 0) {
      LOG_INFO("shard " << options_.shard.shard_id << " registered again with the coordinator "
                        << "after " << *failures << " failed keepalive(s)");
    }
    *failures = 0;
    if (options_.num_servers > 0 && r->num_shards() != options_.num_servers) {
      LOG_ERROR("shard " << options_.shard.shard_id << ": the coordinator now runs "
                         << r->num_shards() << " shards but this server was told --num-servers="
                         << options_.num_servers << "; was it restarted with other flags?");
    }
    if (Status keyed = LearnTicketKey(*r); !keyed.ok()) {
      // The key held so far stays; the coordinator was restarted with other flags.
      LOG_ERROR("shard " << options_.shard.shard_id << ": " << keyed.ToString());
    }
    return;
  }
  ++*failures;
  if (keepalive_log_.ShouldLog(std::chrono::steady_clock::now())) {
    LOG_WARN("shard " << options_.shard.shard_id << ": keepalive registration failed (" << *failures
                      << " in a row): " << r.status().ToString()
                      << TransportHintSuffix(r.status().message()));
  }
}

void ParameterServer::BackgroundLoop() {
  const auto started = std::chrono::steady_clock::now();
  std::chrono::milliseconds backoff(100);
  bool registered = false;
  LogPacer participants_log;
  int keepalive_failures = 0;
  auto next_keepalive = std::chrono::steady_clock::time_point::max();
  auto next_key_ask = std::chrono::steady_clock::time_point::min();
  for (;;) {
    std::chrono::milliseconds wait = options_.step_poll;
    const auto now = std::chrono::steady_clock::now();
    // A worker's ticket of a key this shard has not learned: register now
    // (spaced, so that forged tickets cannot make it a flood).
    const bool key_wanted = registered && now >= next_key_ask && service_.TakeTicketKeyWanted();
    if (registered && (now >= next_keepalive || key_wanted)) {
      Reregister(&keepalive_failures);
      if (options_.reregister_interval.count() > 0) {
        next_keepalive = now + options_.reregister_interval;
      }
      if (key_wanted) next_key_ask = now + kKeyAskSpacing;
    }
    if (!registered) {
      if (!TryRegister(started, &registered)) return;
      if (!registered) {
        wait = backoff;
        backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
      } else if (options_.reregister_interval.count() > 0) {
        next_keepalive = now + options_.reregister_interval;
      }
    } else if (!service_.range_known()) {
      (void)service_.EnsureRange();  // Unavailable until the first worker joins
    } else {
      // A restored range, until the coordinator's layout confirms it (a
      // refusal is logged there and answered to every request).
      if (service_.range_unconfirmed()) (void)service_.ConfirmRestoredRange();
      Status s = service_.RefreshParticipants();
      // Paced: a coordinator outage would otherwise log every poll.
      if (!s.ok() && participants_log.ShouldLog(std::chrono::steady_clock::now())) {
        LOG_WARN("shard " << options_.shard.shard_id << ": " << s.ToString()
                          << participants_log.SinceLastLine("more"));
      }
    }
    if (auto due = service_.TakeDueCheckpoint()) {
      WriteCheckpoint(due, "periodic");
      service_.CheckpointDone();
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_cv_.wait_for(lock, wait, [this] { return stop_ || checkpoint_due_; }) && stop_) {
      return;
    }
    checkpoint_due_ = false;
  }
}

void ParameterServer::Shutdown(std::chrono::milliseconds deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  metrics_endpoint_.reset();
  service_.Stop();
  if (grpc_.server) {
    grpc_.Shutdown(deadline);
    // No call is in flight any more: this is the shard's final state.
    if (!final_checkpoint_done_ && !options_.checkpoint.dir.empty()) {
      final_checkpoint_done_ = true;
      WriteCheckpoint(service_.CheckpointState(), "shutdown");
    }
  }
}

}  // namespace loco

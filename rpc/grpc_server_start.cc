#include "rpc/grpc_server_start.h"

#include <grpcpp/health_check_service_interface.h>

namespace loco {

GrpcServerOptions MakeGrpcServerOptions(const GrpcListenOptions& listen,
                                        const std::string& health_name,
                                        std::shared_ptr<const TransportSecurity> security,
                                        std::shared_ptr<AuthRejections> auth_rejections) {
  GrpcServerOptions options;
  static_cast<GrpcListenOptions&>(options) = listen;
  options.health_names = {health_name};
  options.security = std::move(security);
  options.auth_rejections = std::move(auth_rejections);
  return options;
}

void GrpcServerFlags::ApplyTo(GrpcListenOptions* listen) const {
  listen->max_concurrent_streams = static_cast<int>(max_concurrent_streams);
  listen->max_threads = static_cast<int>(max_threads);
  if (health_port > 0) listen->health_port = static_cast<int>(health_port);
}

void AddGrpcServerFlags(FlagSet& flags, GrpcServerFlags* out) {
  const GrpcListenOptions defaults;
  flags.AddInt("max-concurrent-streams", "LOCO_MAX_CONCURRENT_STREAMS",
               defaults.max_concurrent_streams, 1, 1 << 20,
               "HTTP/2 streams one client connection may have open at once (further calls "
               "wait in the client), so that one client cannot take every stream",
               &out->max_concurrent_streams);
  flags.AddInt("max-server-threads", "LOCO_MAX_SERVER_THREADS", defaults.max_threads, 1, 1 << 20,
               "threads the gRPC server may use in all; calls beyond them get "
               "RESOURCE_EXHAUSTED (a waiting pull holds one)",
               &out->max_threads);
  flags.AddInt("health-port", "LOCO_HEALTH_PORT", 0, 0, 65535,
               "plaintext port serving only the standard gRPC health service, for probes that "
               "cannot do TLS or tokens (0 = off)",
               &out->health_port);
}

Status CheckGrpcServerFlags(const FlagSet& parsed, int64_t port, const GrpcServerFlags& flags) {
  if (flags.health_port > 0 && flags.health_port == port) {
    return InvalidArgument(parsed.NamedWithValue("health-port", std::to_string(flags.health_port)) +
                           " must differ from " + parsed.Named("port") +
                           ": the health port is a second, plaintext listener");
  }
  return Status::Ok();
}

void AnnounceListening(std::ostream& out, const std::string& address,
                       const std::string& metrics_host, int metrics_port) {
  out << "LISTENING " << address << std::endl;
  if (metrics_port > 0) out << "METRICS " << JoinHostPort(metrics_host, metrics_port) << std::endl;
}

void GrpcServerHandle::SetServing(const std::string& name, bool serving) {
  for (grpc::Server* s : {server.get(), health_server.get()}) {
    if (s == nullptr) continue;
    if (auto* health = s->GetHealthCheckService()) health->SetServingStatus(name, serving);
  }
}

void GrpcServerHandle::Shutdown(std::chrono::milliseconds deadline) {
  if (server) {
    server->Shutdown(std::chrono::system_clock::now() + deadline);
    server->Wait();
    server.reset();
  }
  if (health_server) {
    health_server->Shutdown(std::chrono::system_clock::now());
    health_server->Wait();
    health_server.reset();
  }
}

namespace {

void MarkServing(grpc::Server* server, const std::vector<std::string>& health_names) {
  if (auto* health = server->GetHealthCheckService()) {
    health->SetServingStatus(true);
    for (const auto& name : health_names) health->SetServingStatus(name, true);
  }
}

// Every option StartGrpcServer takes, checked before anything binds.
Status ValidateGrpcServerOptions(const GrpcServerOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument("port " + std::to_string(options.port) + " is outside [0, 65535]");
  }
  if (options.health_port && (*options.health_port < 0 || *options.health_port > 65535)) {
    return InvalidArgument("health port " + std::to_string(*options.health_port) +
                           " is outside [0, 65535]");
  }
  if (options.health_port && *options.health_port != 0 && *options.health_port == options.port) {
    return InvalidArgument("the health port must differ from the main port " +
                           std::to_string(options.port));
  }
  if (options.max_message_mb < 1 || options.max_message_mb > 2047) {
    return InvalidArgument("max message size " + std::to_string(options.max_message_mb) +
                           " MiB is outside [1, 2047] (gRPC limits messages to < 2 GiB)");
  }
  if (options.max_concurrent_streams < 1 || options.max_concurrent_streams > (1 << 20) ||
      options.max_threads < 1 || options.max_threads > (1 << 20)) {
    return InvalidArgument("max concurrent streams " +
                           std::to_string(options.max_concurrent_streams) + " and max threads " +
                           std::to_string(options.max_threads) + " must both be in [1, 1048576]");
  }
  if (options.stream_window_bytes != 0 &&
      (options.stream_window_bytes < (64 << 10) || options.stream_window_bytes > (1 << 30))) {
    return InvalidArgument("stream window " + std::to_string(options.stream_window_bytes) +
                           " bytes is invalid; expected 0 (gRPC's adaptive window) or a size "
                           "in [65536, 1073741824]");
  }
  if (!options.security) {
    return FailedPrecondition("no transport security given: pass TLS material or ask for "
                              "plaintext explicitly (TransportSecurityOptions::Insecure())");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<GrpcServerHandle> StartGrpcServer(const GrpcServerOptions& options,
                                           const std::vector<grpc::Service*>& services) {
  LOCO_RETURN_IF_ERROR(ValidateGrpcServerOptions(options));
  // A process-wide gRPC setting; it only has to be on before BuildAndStart.
  grpc::EnableDefaultHealthCheckService(true);
  GrpcServerHandle handle;
  const std::string address = JoinHostPort(options.host, options.port);
  {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, options.security->ServerCredentials(options.auth_rejections),
                             &handle.port);
    const int max_bytes = options.max_message_mb * 1024 * 1024;
    builder.SetMaxReceiveMessageSize(max_bytes);
    builder.SetMaxSendMessageSize(max_bytes);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
    // gRPC binds with SO_REUSEPORT by default: a second process on a taken
    // port would start as if alone and the kernel would split the clients'
    // connections between the two. A taken port must fail the start instead.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    if (options.stream_window_bytes > 0) {
      builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
      builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                                 options.stream_window_bytes);
    }
    grpc::ResourceQuota quota("loco-server");  // per server: a test runs several per process
    quota.SetMaxThreads(options.max_threads);
    builder.SetResourceQuota(quota);
    for (grpc::Service* s : services) builder.RegisterService(s);
    handle.server = builder.BuildAndStart();
  }
  if (!handle.server || handle.port == 0) {
    return Unavailable("could not listen on " + address +
                       " (address in use, host not local, or TLS certificate and key that "
                       "gRPC refused?)");
  }
  if (options.health_port) {
    const std::string health_address = JoinHostPort(options.host, *options.health_port);
    grpc::ServerBuilder builder;
    // Plaintext on purpose: only the health service is registered here.
    builder.AddListeningPort(health_address, grpc::InsecureServerCredentials(),
                             &handle.health_port);
    builder.SetMaxReceiveMessageSize(64 * 1024);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // as the main port
    // The base class refuses every call with UNIMPLEMENTED; the default
    // health service still answers grpc.health.v1.Health.
    handle.health_fallback = std::make_unique<grpc::CallbackGenericService>();
    builder.RegisterCallbackGenericService(handle.health_fallback.get());
    handle.health_server = builder.BuildAndStart();
    if (!handle.health_server || handle.health_port == 0) {
      handle.Shutdown(std::chrono::milliseconds(0));
      return Unavailable("could not listen on health port " + health_address +
                         " (address in use?)");
    }
    MarkServing(handle.health_server.get(), options.health_names);
  }
  MarkServing(handle.server.get(), options.health_names);
  return handle;
}

}  // namespace loco

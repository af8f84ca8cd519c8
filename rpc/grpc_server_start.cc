#include "rpc/grpc_server_start.h"

#include <grpcpp/health_check_service_interface.h>

namespace loco {

void AddGrpcServerFlags(FlagSet& flags, int64_t* max_concurrent_streams, int64_t* max_threads,
                        int64_t* health_port) {
  const GrpcServerOptions d;
  flags.AddInt("max-concurrent-streams", "LOCO_MAX_CONCURRENT_STREAMS", d.max_concurrent_streams,
               1, 1 << 20,
               "HTTP/2 streams one client connection may have open at once (further calls "
               "wait in the client), so that one client cannot take every stream",
               max_concurrent_streams);
  flags.AddInt("max-server-threads", "LOCO_MAX_SERVER_THREADS", d.max_threads, 1, 1 << 20,
               "threads the gRPC server may use in all; calls beyond them get "
               "RESOURCE_EXHAUSTED (a waiting pull holds one)",
               max_threads);
  flags.AddInt("health-port", "LOCO_HEALTH_PORT", 0, 0, 65535,
               "plaintext port serving only the standard gRPC health service, for probes that "
               "cannot do TLS or tokens (0 = off)",
               health_port);
}

Status CheckGrpcServerFlags(int64_t port, int64_t health_port) {
  if (health_port > 0 && health_port == port) {
    return InvalidArgument("--health-port (" + std::to_string(health_port) +
                           ") must differ from --port: the health port is a second, plaintext "
                           "listener");
  }
  return Status::Ok();
}

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return "[" + host + "]:" + std::to_string(port);
  }
  return host + ":" + std::to_string(port);
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

}  // namespace

StatusOr<GrpcServerHandle> StartGrpcServer(const GrpcServerOptions& o,
                                           const std::vector<grpc::Service*>& services) {
  if (o.port < 0 || o.port > 65535) {
    return InvalidArgument("port " + std::to_string(o.port) + " is outside [0, 65535]");
  }
  if (o.health_port && (*o.health_port < 0 || *o.health_port > 65535)) {
    return InvalidArgument("health port " + std::to_string(*o.health_port) +
                           " is outside [0, 65535]");
  }
  if (o.health_port && *o.health_port != 0 && *o.health_port == o.port) {
    return InvalidArgument("the health port must differ from the main port " +
                           std::to_string(o.port));
  }
  if (o.max_message_mb < 1 || o.max_message_mb > 2047) {
    return InvalidArgument("max message size " + std::to_string(o.max_message_mb) +
                           " MiB is outside [1, 2047] (gRPC limits messages to < 2 GiB)");
  }
  if (o.max_concurrent_streams < 1 || o.max_concurrent_streams > (1 << 20) ||
      o.max_threads < 1 || o.max_threads > (1 << 20)) {
    return InvalidArgument("max concurrent streams " + std::to_string(o.max_concurrent_streams) +
                           " and max threads " + std::to_string(o.max_threads) +
                           " must both be in [1, 1048576]");
  }
  if (o.stream_window_bytes != 0 &&
      (o.stream_window_bytes < (64 << 10) || o.stream_window_bytes > (1 << 30))) {
    return InvalidArgument("stream window " + std::to_string(o.stream_window_bytes) +
                           " bytes is invalid; expected 0 (gRPC's adaptive window) or a size "
                           "in [65536, 1073741824]");
  }
  if (!o.security) {
    return FailedPrecondition("no transport security given: pass TLS material or ask for "
                              "plaintext explicitly (TransportSecurityOptions::Insecure())");
  }
  // A process-wide gRPC setting; it only has to be on before BuildAndStart.
  grpc::EnableDefaultHealthCheckService(true);
  GrpcServerHandle handle;
  const std::string address = JoinHostPort(o.host, o.port);
  {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, o.security->ServerCredentials(o.auth_rejections),
                             &handle.port);
    const int max_bytes = o.max_message_mb * 1024 * 1024;
    builder.SetMaxReceiveMessageSize(max_bytes);
    builder.SetMaxSendMessageSize(max_bytes);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, o.max_concurrent_streams);
    if (o.stream_window_bytes > 0) {
      builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
      builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, o.stream_window_bytes);
    }
    grpc::ResourceQuota quota("loco-server");  // per server: a test runs several per process
    quota.SetMaxThreads(o.max_threads);
    builder.SetResourceQuota(quota);
    for (grpc::Service* s : services) builder.RegisterService(s);
    handle.server = builder.BuildAndStart();
  }
  if (!handle.server || handle.port == 0) {
    return Unavailable("could not listen on " + address +
                       " (address in use, host not local, or TLS certificate and key that "
                       "gRPC refused?)");
  }
  if (o.health_port) {
    const std::string health_address = JoinHostPort(o.host, *o.health_port);
    grpc::ServerBuilder builder;
    // Plaintext on purpose: only the health service is registered here.
    builder.AddListeningPort(health_address, grpc::InsecureServerCredentials(),
                             &handle.health_port);
    builder.SetMaxReceiveMessageSize(64 * 1024);
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
    MarkServing(handle.health_server.get(), o.health_names);
  }
  MarkServing(handle.server.get(), o.health_names);
  return handle;
}

}  // namespace loco

// StartGrpcServer: the one way this project opens a listening gRPC server.
// Credentials come from a TransportSecurity (TLS, mutual TLS, bearer token,
// or plaintext when asked for); the standard health service is enabled and
// reports SERVING for `health_names` once started; message-size limits are
// set deliberately (gRPC's 4 MiB default would refuse real shards).
//
// With a health port, a second server on host:health_port serves only
// grpc.health.v1.Health, in plaintext and without a token, so that probes
// that can do neither (Kubernetes' native gRPC probes) work while the main
// port requires TLS. It exposes nothing but the serving status.
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/host_port.h"
#include "common/status.h"
#include "security/auth_rejections.h"
#include "security/transport_security.h"

namespace loco {

// Where a server listens and the limits it sets: what a server binary's
// options (CoordinatorServerOptions, ParameterServerOptions) and its flags
// say about its gRPC port.
struct GrpcListenOptions {
  std::string host = "127.0.0.1";  // a name or an IPv4/IPv6 literal
  int port = 0;                    // 0 = any free port
  int max_message_mb = 16;
  // The plaintext health-only port: nullopt = none, 0 = any free port.
  std::optional<int> health_port;
  // Resource limits, so that one client cannot take every thread or open
  // unbounded streams. HTTP/2 streams one client connection may have open at
  // once (GRPC_ARG_MAX_CONCURRENT_STREAMS; further calls wait in the client),
  // in [1, 1 << 20]:
  int max_concurrent_streams = 100;
  // Threads the main server may use in all (a grpc::ResourceQuota of its
  // own); calls beyond them get RESOURCE_EXHAUSTED. In [1, 1 << 20]; each
  // waiting pull holds one for at most --max-pull-wait-ms.
  int max_threads = 512;
  // HTTP/2 flow-control window of each incoming stream, in bytes; 0 =
  // gRPC's adaptive window (bandwidth-delay probing), which grows until
  // the transport buffers whole large messages ahead of the handler. A
  // fixed window bounds what one stream holds in the transport and still
  // fills links up to window / round-trip time. 0 or in [64 KiB, 1 GiB].
  int stream_window_bytes = 0;
};

struct GrpcServerOptions : GrpcListenOptions {
  std::vector<std::string> health_names;  // services reported SERVING
  // Required: how the main port is secured.
  std::shared_ptr<const TransportSecurity> security;
  // Where calls refused for their token are counted and logged (nullable).
  std::shared_ptr<AuthRejections> auth_rejections;
};

// The options of a server that listens as `listen` says, reports
// `health_name` SERVING, secures its main port with `security` and counts
// refused tokens in `auth_rejections` (nullable).
GrpcServerOptions MakeGrpcServerOptions(const GrpcListenOptions& listen,
                                        const std::string& health_name,
                                        std::shared_ptr<const TransportSecurity> security,
                                        std::shared_ptr<AuthRejections> auth_rejections);

struct GrpcServerHandle {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the bound port (the kernel's choice when 0 was asked)
  // Answers every method but health on the health port with UNIMPLEMENTED
  // (gRPC will not start a server without a service of its own). Declared
  // before health_server so that it outlives it.
  std::unique_ptr<grpc::CallbackGenericService> health_fallback;
  std::unique_ptr<grpc::Server> health_server;  // null without a health port
  int health_port = 0;                          // its bound port; 0 when none

  // Stops both servers, giving in-flight calls on the main one until
  // `deadline` from now; waits for them. Idempotent.
  void Shutdown(std::chrono::milliseconds deadline);
  // Reports the health of service `name` on both ports (the readiness a
  // probe asking for `name` sees); the overall status ("") stays SERVING,
  // which liveness probes ask for. Thread-safe; no-op once shut down.
  void SetServing(const std::string& name, bool serving);
};

// The services must outlive the returned servers. A port another socket
// already listens on (this process's or another's) fails the start with
// UNAVAILABLE: the ports are bound without SO_REUSEPORT, which gRPC would
// otherwise set, so that two servers never silently share one port.
StatusOr<GrpcServerHandle> StartGrpcServer(const GrpcServerOptions& options,
                                           const std::vector<grpc::Service*>& services);

// The flags every server binary shares beyond --host, --port and
// --max-message-mb (whose defaults differ), as parsed.
struct GrpcServerFlags {
  int64_t max_concurrent_streams = 0;
  int64_t max_threads = 0;
  int64_t health_port = 0;  // 0 = no health port

  // Sets `listen`'s limits and health port from them.
  void ApplyTo(GrpcListenOptions* listen) const;
};

// Registers those flags (flag, environment variable, GrpcListenOptions'
// default and range): --max-concurrent-streams, --max-server-threads and
// --health-port, bound to `*out`.
void AddGrpcServerFlags(FlagSet& flags, GrpcServerFlags* out);
// The check those flags need against --port once parsed: InvalidArgument,
// naming both flags (as `parsed`, the FlagSet that read them, names them:
// FlagSet::Named), when the health port would be the service's own port.
[[nodiscard]] Status CheckGrpcServerFlags(const FlagSet& parsed, int64_t port,
                                          const GrpcServerFlags& flags);

// What a server binary prints on stdout once serving, for the launcher and
// the tests that start it: "LISTENING <address>", then "METRICS
// <metrics_host>:<metrics_port>" when metrics_port > 0. Flushed.
void AnnounceListening(std::ostream& out, const std::string& address,
                       const std::string& metrics_host, int metrics_port);

}  // namespace loco

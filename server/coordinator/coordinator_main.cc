// loco-coordinator: membership, shard map and step participants for one
// LoCo-PS cluster. Prints "LISTENING host:port" once serving (then
// "METRICS host:port" when --metrics-port is set); exits 0 on
// SIGINT/SIGTERM, 2 on invalid flags, 1 when it cannot start.
#include <cstdio>
#include <iostream>
#include <optional>

#include "common/flags.h"
#include "common/lock_order_checks.h"
#include "common/log.h"
#include "common/termination_watch.h"
#include "common/transport_security_options.h"
#include "security/transport_security.h"
#include "server/coordinator/coordinator_server.h"

int main(int argc, char** argv) {
  using namespace loco;
  DisableLockOrderChecks();
  std::string host;
  int64_t port = 0, num_servers = 0, shard_align = 0, hb_interval = 0, hb_timeout = 0;
  int64_t max_message_mb = 0, shutdown_ms = 0;
  FlagSet flags("loco-coordinator");
  flags.AddString("host", "LOCO_HOST", "127.0.0.1", "address to listen on", &host);
  flags.AddInt("port", "LOCO_PORT", 0, 0, 65535, "port to listen on (0 = any free port)", &port);
  flags.AddInt("num-servers", "LOCO_NUM_SERVERS", 0, 0, 65536,
               "number of parameter-server shards (required, >= 1)", &num_servers);
  flags.AddInt("shard-align", "LOCO_SHARD_ALIGN", 4096, 32, int64_t{1} << 30,
               "shard boundaries are multiples of this (a multiple of 32; the workers' LoCo "
               "block size must divide it)",
               &shard_align);
  flags.AddInt("heartbeat-interval-ms", "LOCO_HEARTBEAT_INTERVAL_MS", 1000, 1, 3600000,
               "how often workers are told to heartbeat", &hb_interval);
  flags.AddInt("heartbeat-timeout-ms", "LOCO_HEARTBEAT_TIMEOUT_MS", 5000, 1, 3600000,
               "a worker silent this long is expired", &hb_timeout);
  flags.AddInt("max-message-mb", "LOCO_MAX_MESSAGE_MB", 16, 1, 2047,
               "largest gRPC message accepted or sent, MiB", &max_message_mb);
  int64_t max_streams = 0, max_threads = 0, health_port = 0;
  AddGrpcServerFlags(flags, &max_streams, &max_threads, &health_port);
  flags.AddInt("shutdown-timeout-ms", "LOCO_SHUTDOWN_TIMEOUT_MS", 2000, 0, 600000,
               "on SIGTERM, how long in-flight calls may finish", &shutdown_ms);
  std::string metrics_host;
  int64_t metrics_port = 0;
  flags.AddString("metrics-host", "LOCO_METRICS_HOST", "127.0.0.1",
                  "address the Prometheus /metrics endpoint listens on", &metrics_host);
  flags.AddInt("metrics-port", "LOCO_METRICS_PORT", 0, 0, 65535,
               "port of the Prometheus /metrics endpoint (0 = off)", &metrics_port);
  TransportSecurityOptions security;
  AddTransportSecurityFlags(flags, TransportRole::kServer, &security);
  if (std::optional<int> exit_code = flags.ParseCommandLine(argc, argv, std::cout, std::cerr)) {
    return *exit_code;
  }
  if (num_servers < 1) {
    std::cerr << "loco-coordinator: --num-servers (or $LOCO_NUM_SERVERS) is required and must be "
                 ">= 1\n";
    return 2;
  }
  if (shard_align % 32 != 0) {
    std::cerr << "loco-coordinator: invalid value '" << shard_align
              << "' for --shard-align: expected a multiple of 32\n";
    return 2;
  }
  if (hb_interval >= hb_timeout) {
    std::cerr << "loco-coordinator: --heartbeat-interval-ms (" << hb_interval
              << ") must be below --heartbeat-timeout-ms (" << hb_timeout << ")\n";
    return 2;
  }
  if (Status s = CheckGrpcServerFlags(port, health_port); !s.ok()) {
    std::cerr << "loco-coordinator: " << s.message() << "\n";
    return 2;
  }
  // Checks the combination and reads the TLS files and the token now, so that
  // a bad setting is a usage error (exit 2) named before anything starts.
  if (auto loaded = TransportSecurity::Load(security, TransportRole::kServer); !loaded.ok()) {
    std::cerr << "loco-coordinator: " << loaded.status().message() << "\n";
    return 2;
  }
  SetLogTag("coordinator");
  if (Status s = TerminationWatch::Install(); !s.ok()) {
    LOG_ERROR(s.ToString());
    return 1;
  }

  CoordinatorServerOptions options;
  options.host = host;
  options.port = static_cast<int>(port);
  options.max_message_mb = static_cast<int>(max_message_mb);
  options.max_concurrent_streams = static_cast<int>(max_streams);
  options.max_threads = static_cast<int>(max_threads);
  options.coordinator.membership.num_shards = static_cast<uint32_t>(num_servers);
  options.coordinator.membership.shard_align = static_cast<uint32_t>(shard_align);
  options.coordinator.membership.heartbeat_timeout = std::chrono::milliseconds(hb_timeout);
  options.coordinator.heartbeat_interval = std::chrono::milliseconds(hb_interval);
  options.metrics.enabled = metrics_port > 0;
  options.metrics.host = metrics_host;
  options.metrics.port = static_cast<int>(metrics_port);
  options.security = security;
  if (health_port > 0) options.health_port = static_cast<int>(health_port);
  CoordinatorServer server(options);
  auto bound = server.Start();
  if (!bound.ok()) {
    LOG_ERROR("cannot start: " << bound.status().ToString());
    return 1;
  }
  std::cout << "LISTENING " << server.address() << std::endl;
  if (server.metrics_port() > 0) {
    std::cout << "METRICS " << JoinHostPort(metrics_host, server.metrics_port()) << std::endl;
  }
  int sig = TerminationWatch::Wait(nullptr);
  LOG_INFO("signal " << sig << " received; shutting down");
  server.Shutdown(std::chrono::milliseconds(shutdown_ms));
  return 0;
}

// loco-coordinator: membership, shard map and step participants for one
// LoCo-PS cluster. Prints "LISTENING host:port" once serving (then
// "METRICS host:port" when --metrics-port is set); exits 0 on
// SIGINT/SIGTERM, 2 on invalid flags, 1 when it cannot start.
#include <iostream>
#include <optional>

#include "common/flag_checks.h"
#include "common/flags.h"
#include "common/host_port.h"
#include "common/lock_order_checks.h"
#include "common/log.h"
#include "common/shutdown_timeout_flag.h"
#include "common/termination_watch.h"
#include "common/transport_security_options.h"
#include "metrics/metrics_endpoint_flags.h"
#include "security/transport_security.h"
#include "security/worker_ticket.h"
#include "server/coordinator/coordinator_server.h"
#include "server/coordinator/incarnation.h"
#include "server/coordinator/ticket_key_file.h"

namespace loco {
namespace {

// Every flag's value as parsed, before OptionsFromFlags gives them their
// types and units.
struct CoordinatorFlags {
  std::string host;
  int64_t port = 0, num_servers = 0, shard_align = 0;
  int64_t heartbeat_interval_ms = 0, heartbeat_timeout_ms = 0, max_message_mb = 0;
  int64_t max_workers = 0;
  double max_joins_per_second = 0;
  std::string ticket_key_file;
  std::string state_dir;
  int64_t recovery_window_ms = 0;
  GrpcServerFlags grpc;
  int64_t shutdown_timeout_ms = 0;
  std::string metrics_host;
  int64_t metrics_port = 0;
  TransportSecurityOptions security;
};

// In the order --help and the README's configuration table list them.
void DefineCoordinatorFlags(FlagSet& flags, CoordinatorFlags* values) {
  flags.AddString("host", "LOCO_HOST", "127.0.0.1", "address to listen on", CheckHost,
                  &values->host);
  flags.AddInt("port", "LOCO_PORT", 0, 0, 65535, "port to listen on (0 = any free port)",
               &values->port);
  flags.AddInt("num-servers", "LOCO_NUM_SERVERS", 0, 0, 65536,
               "number of parameter-server shards (required, >= 1)", &values->num_servers);
  flags.AddInt("shard-align", "LOCO_SHARD_ALIGN", 4096, 32, int64_t{1} << 30,
               "shard boundaries are multiples of this (a multiple of 32; the workers' LoCo "
               "block size must divide it)",
               &values->shard_align);
  flags.AddInt("heartbeat-interval-ms", "LOCO_HEARTBEAT_INTERVAL_MS", 1000, 1, 3600000,
               "how often workers are told to heartbeat", &values->heartbeat_interval_ms);
  flags.AddInt("heartbeat-timeout-ms", "LOCO_HEARTBEAT_TIMEOUT_MS", 5000, 1, 3600000,
               "a worker silent this long is expired", &values->heartbeat_timeout_ms);
  flags.AddInt("max-workers", "LOCO_MAX_WORKERS", 1024, 1, 65536,
               "most workers admitted at once; further joins get RESOURCE_EXHAUSTED",
               &values->max_workers);
  flags.AddDouble("max-joins-per-second", "LOCO_MAX_JOINS_PER_SECOND", 100, 0.001, 1e6,
                  "joins admitted per second once a burst of --max-workers is spent; faster "
                  "joins get RESOURCE_EXHAUSTED",
                  &values->max_joins_per_second);
  flags.AddString("ticket-key-file", "LOCO_TICKET_KEY_FILE", "",
                  "file holding the key (32..4096 bytes once trailing line breaks are "
                  "dropped; `openssl rand -hex 32 > FILE`) that signs worker tickets, so that "
                  "they survive a restart (empty = the state directory's key with --state-dir, "
                  "else a random key per process)",
                  &values->ticket_key_file);
  flags.AddString(
      "state-dir", "LOCO_STATE_DIR", "",
      "existing directory that keeps the incarnation number across restarts and, without "
      "--ticket-key-file, the worker-ticket key (ticket.key, created on the first "
      "start) so that workers resume under their ids (empty = the incarnation from "
      "the clock)",
      &values->state_dir);
  flags.AddInt("recovery-window-ms", "LOCO_RECOVERY_WINDOW_MS", 0, 0, 3600000,
               "after a restart, how long workers may resume under their id and reported "
               "steps wait for their participants (0 = twice the heartbeat timeout, at least "
               "two heartbeat intervals + 7 s)",
               &values->recovery_window_ms);
  flags.AddInt("max-message-mb", "LOCO_MAX_MESSAGE_MB", 16, 1, 2047,
               "largest gRPC message accepted or sent, MiB", &values->max_message_mb);
  AddGrpcServerFlags(flags, &values->grpc);
  AddShutdownTimeoutFlag(flags, &values->shutdown_timeout_ms);
  AddMetricsEndpointFlags(flags, &values->metrics_host, &values->metrics_port);
  AddTransportSecurityFlags(flags, TransportRole::kServer, &values->security);
}

// What the flags cannot check one by one: a usage error (exit 2), named
// before anything starts. Reads the TLS files and the token, so that a bad
// file is one too, and looks at --state-dir, writing nothing.
Status CheckUsage(const FlagSet& flags, const CoordinatorFlags& values) {
  if (values.num_servers < 1) {
    return InvalidArgument(
        "--num-servers (or $LOCO_NUM_SERVERS) is required and must be >= 1");
  }
  if (values.shard_align % 32 != 0) {
    return InvalidArgument("invalid value '" + std::to_string(values.shard_align) + "' for " +
                           flags.Named("shard-align") + ": expected a multiple of 32");
  }
  if (values.heartbeat_interval_ms >= values.heartbeat_timeout_ms) {
    return InvalidArgument(
        flags.NamedWithValue("heartbeat-interval-ms",
                             std::to_string(values.heartbeat_interval_ms)) +
        " must be below " +
        flags.NamedWithValue("heartbeat-timeout-ms", std::to_string(values.heartbeat_timeout_ms)) +
        ": a process that beats once an interval would be declared dead between two beats");
  }
  LOCO_RETURN_IF_ERROR(CheckGrpcServerFlags(flags, values.port, values.grpc));
  LOCO_RETURN_IF_ERROR(
      CheckListenerPorts(flags, ServiceListeners(values.host, values.port, values.grpc.health_port,
                                                 values.metrics_host, values.metrics_port)));
  LOCO_RETURN_IF_ERROR(
      CheckDirectoryFlag(flags.Named("state-dir"), values.state_dir, DirectoryUse::kExisting));
  if (!values.ticket_key_file.empty()) {
    LOCO_RETURN_IF_ERROR(WorkerTicketKey::FromFile(values.ticket_key_file).status());
  }
  return TransportSecurity::Load(values.security, TransportRole::kServer).status();
}

CoordinatorServerOptions OptionsFromFlags(const CoordinatorFlags& values, uint64_t incarnation,
                                          const std::string& ticket_key_file) {
  CoordinatorServerOptions options;
  options.host = values.host;
  options.port = static_cast<int>(values.port);
  options.max_message_mb = static_cast<int>(values.max_message_mb);
  values.grpc.ApplyTo(&options);
  options.coordinator.membership.num_shards = static_cast<uint32_t>(values.num_servers);
  options.coordinator.membership.shard_align = static_cast<uint32_t>(values.shard_align);
  options.coordinator.membership.heartbeat_timeout =
      std::chrono::milliseconds(values.heartbeat_timeout_ms);
  options.coordinator.heartbeat_interval = std::chrono::milliseconds(values.heartbeat_interval_ms);
  options.coordinator.membership.max_workers = static_cast<size_t>(values.max_workers);
  options.coordinator.max_joins_per_second = values.max_joins_per_second;
  options.coordinator.ticket_key_file = ticket_key_file;
  options.coordinator.membership.incarnation = incarnation;
  // By default twice the heartbeat timeout: a worker reconnecting to the
  // restarted coordinator may first wait out its channel's reconnect
  // backoff. At least two heartbeats and 3 s more for workers that were
  // between steps (no server names them).
  const int64_t min_recovery_ms = 2 * values.heartbeat_interval_ms + 5000;
  options.coordinator.membership.recovery_window = std::chrono::milliseconds(
      values.recovery_window_ms > 0
          ? values.recovery_window_ms
          : std::max(2 * values.heartbeat_timeout_ms, min_recovery_ms + 2000));
  options.coordinator.membership.min_recovery = std::chrono::milliseconds(min_recovery_ms);
  options.metrics = MetricsEndpointOptionsFromFlags(values.metrics_host, values.metrics_port);
  options.security = values.security;
  return options;
}

// The worker-ticket key file: --ticket-key-file, or with --state-dir alone
// the file "ticket.key" there, created on the first start, so that tickets
// survive restarts as the incarnation does; empty (a random key per
// process) without either.
StatusOr<std::string> TicketKeyFile(const CoordinatorFlags& values) {
  if (!values.ticket_key_file.empty() || values.state_dir.empty()) {
    return values.ticket_key_file;
  }
  const std::string path = values.state_dir + "/ticket.key";
  StatusOr<bool> created = WriteTicketKeyIfMissing(path);
  if (!created.ok()) return created.status();
  LOG_INFO("worker tickets signed with the key in " << path << (*created ? " (new)" : " (kept)"));
  return path;
}

// Starts the coordinator, announces it on stdout and serves until SIGINT or
// SIGTERM; returns the exit code.
int Serve(const CoordinatorServerOptions& options, std::chrono::milliseconds shutdown_timeout) {
  CoordinatorServer server(options);
  auto bound = server.Start();
  if (!bound.ok()) {
    LOG_ERROR("cannot start: " << bound.status().ToString());
    return 1;
  }
  AnnounceListening(std::cout, server.address(), options.metrics.host, server.metrics_port());
  int sig = TerminationWatch::Wait(nullptr);
  LOG_INFO("signal " << sig << " received; shutting down");
  server.Shutdown(shutdown_timeout);
  return 0;
}

}  // namespace
}  // namespace loco

int main(int argc, char** argv) {
  using namespace loco;
  DisableLockOrderChecks();
  CoordinatorFlags values;
  FlagSet flags("loco-coordinator");
  DefineCoordinatorFlags(flags, &values);
  if (std::optional<int> exit_code = flags.ParseCommandLine(argc, argv, std::cout, std::cerr)) {
    return *exit_code;
  }
  if (Status s = CheckUsage(flags, values); !s.ok()) {
    std::cerr << "loco-coordinator: " << flags.WithEnvironmentSources(s.message()) << "\n";
    return 2;
  }
  SetLogTag("coordinator");
  if (Status s = TerminationWatch::Install(); !s.ok()) {
    LOG_ERROR(s.ToString());
    return 1;
  }
  // The state directory is written only now, after every check of the
  // flags and of the files they name, so that a refused start leaves it as
  // it was; and before the server starts, since every answer carries the
  // incarnation, which must be stored before anyone sees it (a later
  // restart would otherwise take it again). A start that fails after this
  // (a port already taken) only skips a number.
  auto incarnation = NextIncarnation(values.state_dir, std::chrono::system_clock::now());
  if (!incarnation.ok()) {
    LOG_ERROR("cannot start: " << incarnation.status().ToString());
    return 1;
  }
  LOG_INFO("incarnation " << *incarnation
                          << (values.state_dir.empty() ? " (from the clock)"
                                                       : " (kept in " + values.state_dir + ")"));
  StatusOr<std::string> ticket_key_file = TicketKeyFile(values);
  if (!ticket_key_file.ok()) {
    LOG_ERROR("cannot start: " << ticket_key_file.status().ToString());
    return 1;
  }
  return Serve(OptionsFromFlags(values, *incarnation, *ticket_key_file),
               std::chrono::milliseconds(values.shutdown_timeout_ms));
}

// ParameterServer: one shard's server process in an object. Owns the gRPC
// server (ShardService plus the standard health service), the coordinator
// client, and one background thread that
//   1. registers the shard with the coordinator (exponential backoff capped
//      at 2 s; gives up after register_timeout, or at once when the
//      coordinator refuses the shard id, the model and range it reports or
//      its credential, or this server's TLS handshake refuses the
//      coordinator, and reports fatal_status()),
//      and then registers again every reregister_interval as a keepalive:
//      a coordinator restarted with an empty memory (kill -9, a pod moved)
//      learns the shard map again from its servers without an operator,
//      since every fact it holds is held by a server or a worker; each
//      answer brings the coordinator's worker-ticket key (TicketCheck),
//      and a worker's ticket of a key the shard has not learned makes it
//      register again at once (at most every kKeyAskSpacing),
//   2. learns the shard's range once the first worker fixed the model size,
//   3. while pushes are pending, re-asks the coordinator every step_poll for
//      the open step's live participants (so departed workers stop being
//      waited for).
// No globals: a test can run several servers and a coordinator in one
// process. Start() does not wait for the coordinator.
#pragma once

#include <prometheus/registry.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/log_pacer.h"
#include "common/status.h"
#include "metrics/metrics_endpoint.h"
#include "rpc/grpc_server_start.h"
#include "security/transport_security.h"
#include "server/checkpoint.h"
#include "server/coordinator_client.h"
#include "server/server_metrics.h"
#include "server/shard_service.h"

namespace loco {

// Where the server listens and its gRPC limits are GrpcListenOptions'
// fields (host, port, max_message_mb, health_port, ...), with two defaults
// of its own (see the constructor).
struct ParameterServerOptions : GrpcListenOptions {
  // Shard-sized messages: 256 MiB. A fixed 1 MiB stream window: with gRPC's
  // adaptive window the transport buffered every worker's whole push at
  // once, beside the parsed payloads (a 5.9M-element shard's peak resident
  // memory fell from 131 to 116 MB on loopback with the fixed window, at the
  // same step time). stream_window_bytes = 0 asks for the adaptive one.
  ParameterServerOptions() {
    max_message_mb = 256;
    stream_window_bytes = 1 << 20;
  }

  std::string coordinator;        // host:port (required)
  std::string advertise_address;  // empty = host:bound_port
  uint32_t num_servers = 0;       // when > 0, must equal the coordinator's shard count
  std::chrono::milliseconds step_poll{50};
  std::chrono::milliseconds coordinator_rpc_timeout{2000};
  std::chrono::milliseconds register_timeout{120000};
  // After the first registration, how often to register again (one attempt
  // each; a failure is logged and retried at the next interval, never
  // fatal). 0 turns the keepalive off.
  std::chrono::milliseconds reregister_interval{2000};
  ShardServiceOptions shard;       // its `metrics` is set by ParameterServer
  MetricsEndpointOptions metrics;  // /metrics; off unless enabled
  // Checkpoints (dir empty = off): Start() resumes from the newest valid one
  // before serving; the background thread writes one after every
  // checkpoint.every-th step (copied under the shard's lock, written outside
  // it) and Shutdown() writes a final one.
  CheckpointOptions checkpoint;
  // How the port and the channel to the coordinator are secured (default:
  // neither TLS nor plaintext, which Start() refuses). Refused calls are
  // counted in loco_auth_rejected_total{shard}.
  TransportSecurityOptions security;
};

class ParameterServer {
 public:
  // The least time between two registrations asked for by tickets of an
  // unknown key (see the class comment): forged tickets cannot make them a
  // flood.
  static constexpr std::chrono::milliseconds kKeyAskSpacing{500};

  explicit ParameterServer(ParameterServerOptions options);
  ~ParameterServer();
  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;

  static Status ValidateOptions(const ParameterServerOptions& options);

  // Validates the options, binds, serves and starts the background thread;
  // returns the bound port.
  StatusOr<int> Start();
  // Stops the background thread, wakes waiting pulls, then shuts the gRPC
  // server down giving in-flight calls until `deadline`. Bounded by
  // deadline + coordinator_rpc_timeout. Idempotent.
  void Shutdown(std::chrono::milliseconds deadline = std::chrono::milliseconds(2000));

  // The version the shard resumed from and the file, when Start() loaded a
  // checkpoint; nullopt / empty otherwise.
  std::optional<uint64_t> restored_version() const { return restored_version_; }
  const std::string& restored_from() const { return restored_from_; }

  bool registered() const;
  // Non-OK once the server can no longer do its job (registration refused or
  // timed out); the binary exits on it.
  Status fatal_status() const;
  std::string address() const { return JoinHostPort(options_.host, port_); }
  // The bound health-only port once started with one; 0 otherwise.
  int health_port() const { return grpc_.health_port; }
  // Calls refused for their token (lives as long as *this).
  const AuthRejections& auth_rejections() const { return *auth_rejections_; }
  std::string advertised_address() const { return advertised_; }
  ShardService& service() { return service_; }
  // The bound /metrics port once started with metrics enabled; 0 otherwise.
  int metrics_port() const { return metrics_endpoint_ ? metrics_endpoint_->port() : 0; }
  prometheus::Registry& metrics_registry() { return *registry_; }
  // This shard's metrics (e.g. for checkpoint writers); lives as long as *this.
  ServerMetrics& metrics() { return *metrics_; }

 private:
  void BackgroundLoop();
  // A refusal of the first registration that no retry with the same
  // flags can change (the shard id, the model and range a restored shard
  // reports, this server's credential, the coordinator's TLS certificate or
  // transport that this server's handshake refuses: rpc/transport_failure.h;
  // a coordinator whose handshake refuses this server's transport, as a
  // probe shows: TransportSecurity::RefusalOfThisTransport), annotated with
  // what to do; nullopt for one worth retrying (the coordinator unreachable
  // or restarting). The background thread's only.
  std::optional<Status> FinalRefusal(const Status& refused);
  // One registration attempt; returns false when it failed for good.
  bool TryRegister(std::chrono::steady_clock::time_point started, bool* done);
  // The keepalive registration (see the class comment); `failures` counts
  // failed ones in a row, for the logs (paced by keepalive_log_).
  void Reregister(int* failures);
  // Who this shard is and what it reports (ShardMachine::FillRegistration).
  v1::RegisterServerRequest RegistrationRequest() const;
  // Hands a registration's worker-ticket key to the service (TicketCheck).
  // FAILED_PRECONDITION when this server requires tickets and the
  // coordinator sends no key (it does not separate roles).
  [[nodiscard]] Status LearnTicketKey(const v1::RegisterServerResponse& registered);
  Status LoadCheckpoint();
  // Writes `c` (when set); failures are logged, training carries on.
  void WriteCheckpoint(const std::optional<ShardCheckpoint>& c, const char* why);

  ParameterServerOptions options_;
  CoordinatorClient coordinator_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<ServerMetrics> metrics_;  // before service_, which points to it
  std::shared_ptr<AuthRejections> auth_rejections_;
  ShardService service_;
  GrpcServerHandle grpc_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
  int port_ = 0;
  std::string advertised_;
  Checkpointer checkpointer_;
  std::optional<uint64_t> restored_version_;
  std::string restored_from_;
  bool final_checkpoint_done_ = false;  // Shutdown's checkpoint, once
  bool checkpoint_due_ = false;         // guarded by mu_; wakes the background thread
  LogPacer register_log_;               // these three: the background thread's only
  LogPacer keepalive_log_;
  std::optional<std::chrono::steady_clock::time_point> last_transport_check_;
  std::shared_ptr<const TransportSecurity> security_;  // set by Start

  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  bool registered_ = false;
  Status fatal_;
  std::thread thread_;
};

}  // namespace loco

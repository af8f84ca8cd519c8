// loco-server: the parameter server for one shard. Prints
// "LISTENING host:port" once serving (then "METRICS host:port" when
// --metrics-port is set); exits 0 on SIGINT/SIGTERM, 2 on invalid
// flags, 1 when it cannot start or cannot register with the coordinator.
// A shard that resumed from a checkpoint first prints
// "RESTORED version=<v> <file>"; on SIGTERM it writes a final checkpoint.
#include <algorithm>
#include <iostream>
#include <optional>
#include <thread>

#include <sched.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "common/flags.h"
#include "common/lock_order_checks.h"
#include "common/log.h"
#include "common/termination_watch.h"
#include "common/transport_security_options.h"
#include "security/transport_security.h"
#include "server/parameter_server.h"

namespace {

// The CPUs this process may run on (its affinity mask: a container's
// cpuset, taskset), which can be fewer than the machine's.
unsigned UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::thread::hardware_concurrency();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace loco;
  DisableLockOrderChecks();
  std::string host, coordinator, advertise, pull_codec;
  int64_t port = 0, shard_id = 0, num_servers = 0, pull_bits = 0, pull_block = 0;
  int64_t full_sync_every = 0, max_message_mb = 0, step_poll_ms = 0, max_pull_wait_ms = 0;
  int64_t coordinator_timeout_ms = 0, register_timeout_s = 0, shutdown_ms = 0;
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, max_grad_norm = 0;
  FlagSet flags("loco-server");
  flags.AddString("host", "LOCO_HOST", "127.0.0.1", "address to listen on", &host);
  flags.AddInt("port", "LOCO_PORT", 0, 0, 65535, "port to listen on (0 = any free port)", &port);
  flags.AddInt("shard-id", "LOCO_SHARD_ID", 0, 0, 65535, "the shard this server owns", &shard_id);
  flags.AddInt("num-servers", "LOCO_NUM_SERVERS", 0, 0, 65536,
               "number of shards, checked against the coordinator (0 = take the coordinator's)",
               &num_servers);
  flags.AddString("coordinator", "LOCO_COORDINATOR", "",
                  "coordinator address host:port (required)", &coordinator);
  flags.AddString("advertise-address", "LOCO_ADVERTISE_ADDRESS", "",
                  "host:port workers use to reach this server (default: host:bound port)",
                  &advertise);
  // The AdamW flags are the defaults of the steps whose pushes carry no
  // hyper-parameters of their own (PushRequest.hyper).
  flags.AddDouble("lr", "LOCO_LR", 1e-3, 0, 1e3,
                  "AdamW learning rate of pushes that carry no hyper-parameters", &lr);
  flags.AddDouble("beta1", "LOCO_BETA1", 0.9, 0, 0.999999,
                  "AdamW beta1 of pushes that carry no hyper-parameters", &beta1);
  flags.AddDouble("beta2", "LOCO_BETA2", 0.999, 0, 0.999999999,
                  "AdamW beta2 of pushes that carry no hyper-parameters", &beta2);
  flags.AddDouble("eps", "LOCO_EPS", 1e-8, 1e-30, 1,
                  "AdamW epsilon of pushes that carry no hyper-parameters", &eps);
  flags.AddDouble("weight-decay", "LOCO_WEIGHT_DECAY", 0, 0, 1e3,
                  "AdamW decoupled weight decay of pushes that carry no hyper-parameters",
                  &weight_decay);
  flags.AddDouble("max-grad-norm", "LOCO_MAX_GRAD_NORM", 0, 0, 1e30,
                  "clip each shard's mean gradient to this norm (per shard; 0 = off)",
                  &max_grad_norm);
  flags.AddEnum("pull-codec", "LOCO_PULL_CODEC", "delta", {"fp32", "bf16", "delta"},
                "encoding of pulled parameters: delta = 8-bit parameter deltas with server-side "
                "error feedback and periodic fp32 syncs",
                &pull_codec);
  flags.AddInt("pull-bits", "LOCO_PULL_BITS", 8, 2, 8, "bits per delta code (2, 4 or 8)",
               &pull_bits);
  flags.AddInt("pull-block-size", "LOCO_PULL_BLOCK_SIZE", 128, 32, 4096,
               "elements per delta scale (multiple of 32)", &pull_block);
  flags.AddInt("full-sync-every", "LOCO_FULL_SYNC_EVERY", 50, 0, int64_t{1} << 40,
               "with delta pulls, send a full fp32 copy every this many steps (0 = never)",
               &full_sync_every);
  flags.AddInt("max-message-mb", "LOCO_MAX_MESSAGE_MB", 256, 1, 2047,
               "largest gRPC message accepted or sent, MiB", &max_message_mb);
  int64_t max_streams = 0, max_threads = 0, health_port = 0;
  AddGrpcServerFlags(flags, &max_streams, &max_threads, &health_port);
  int64_t stream_window_kb = 0;
  flags.AddInt("stream-window-kb", "LOCO_STREAM_WINDOW_KB",
               ParameterServerOptions().stream_window_bytes / 1024, 0, 1 << 20,
               "HTTP/2 flow-control window of each incoming call, KiB (0 = gRPC's adaptive "
               "window, which lets the transport buffer whole pushes; else at least 64)",
               &stream_window_kb);
  flags.AddInt("step-poll-ms", "LOCO_STEP_POLL_MS", 50, 1, 60000,
               "while pushes are pending, how often to ask the coordinator who is still live",
               &step_poll_ms);
  flags.AddInt("max-pull-wait-ms", "LOCO_MAX_PULL_WAIT_MS", 60000, 1, 3600000,
               "longest a pull may wait for a version", &max_pull_wait_ms);
  flags.AddInt("coordinator-timeout-ms", "LOCO_COORDINATOR_TIMEOUT_MS", 2000, 1, 600000,
               "deadline of each call to the coordinator", &coordinator_timeout_ms);
  flags.AddInt("register-timeout-s", "LOCO_REGISTER_TIMEOUT_S", 120, 1, 86400,
               "give up (exit 1) when the coordinator cannot be reached for this long",
               &register_timeout_s);
  flags.AddInt("shutdown-timeout-ms", "LOCO_SHUTDOWN_TIMEOUT_MS", 2000, 0, 600000,
               "on SIGTERM, how long in-flight calls may finish", &shutdown_ms);
  std::string metrics_host;
  int64_t metrics_port = 0;
  flags.AddString("metrics-host", "LOCO_METRICS_HOST", "127.0.0.1",
                  "address the Prometheus /metrics endpoint listens on", &metrics_host);
  flags.AddInt("metrics-port", "LOCO_METRICS_PORT", 0, 0, 65535,
               "port of the Prometheus /metrics endpoint (0 = off)", &metrics_port);
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0, checkpoint_keep = 0, straggler_slack = 0;
  flags.AddString("checkpoint-dir", "LOCO_CHECKPOINT_DIR", "",
                  "folder for this shard's checkpoints; on start the newest valid one is "
                  "loaded (empty = no checkpoints)",
                  &checkpoint_dir);
  flags.AddInt("checkpoint-every", "LOCO_CHECKPOINT_EVERY", 100, 0, int64_t{1} << 40,
               "write a checkpoint after every this many steps (0 = only on SIGTERM)",
               &checkpoint_every);
  flags.AddInt("checkpoint-keep", "LOCO_CHECKPOINT_KEEP", 3, 1, 1000000,
               "newest checkpoints kept per shard", &checkpoint_keep);
  flags.AddInt("straggler-slack", "LOCO_STRAGGLER_SLACK", 0, 0, 65535,
               "complete a step once all but this many live participants pushed (0 = wait "
               "for all; a late push is refused and its worker resynchronises)",
               &straggler_slack);
  int64_t apply_threads = 0;
  flags.AddInt("apply-threads", "LOCO_APPLY_THREADS", 0, 0, kMaxApplyThreads,
               "threads that decode each step's pushes, run AdamW and encode the return delta "
               "(every worker waits for this; the result is the same for any count; 0 = the "
               "CPUs the server may run on, by its affinity, at most 4)",
               &apply_threads);
  int64_t malloc_arenas = 0;
  flags.AddInt("malloc-arenas", "LOCO_MALLOC_ARENAS", 1, 0, 1024,
               "glibc malloc arenas (0 = glibc's default, 8 per core): each gRPC thread that "
               "receives or answers a shard-sized message otherwise keeps its own arena of "
               "freed buffers, which multiplies the server's resident memory; the server "
               "makes few, large allocations, so one arena costs no measurable time",
               &malloc_arenas);
  TransportSecurityOptions security;
  AddTransportSecurityFlags(flags, TransportRole::kServerAndClient, &security);
  if (std::optional<int> exit_code = flags.ParseCommandLine(argc, argv, std::cout, std::cerr)) {
    return *exit_code;
  }
#ifdef __GLIBC__
  // Before any thread starts: the cap applies to arenas created from now on.
  if (malloc_arenas > 0) mallopt(M_ARENA_MAX, static_cast<int>(malloc_arenas));
#endif

  ParameterServerOptions options;
  options.host = host;
  options.port = static_cast<int>(port);
  options.coordinator = coordinator;
  options.advertise_address = advertise;
  options.num_servers = static_cast<uint32_t>(num_servers);
  options.max_message_mb = static_cast<int>(max_message_mb);
  options.max_concurrent_streams = static_cast<int>(max_streams);
  options.max_threads = static_cast<int>(max_threads);
  options.stream_window_bytes = static_cast<int>(stream_window_kb * 1024);
  options.step_poll = std::chrono::milliseconds(step_poll_ms);
  options.coordinator_rpc_timeout = std::chrono::milliseconds(coordinator_timeout_ms);
  options.register_timeout = std::chrono::seconds(register_timeout_s);
  options.shard.shard_id = static_cast<uint32_t>(shard_id);
  options.shard.hyper.lr = static_cast<float>(lr);
  options.shard.hyper.beta1 = static_cast<float>(beta1);
  options.shard.hyper.beta2 = static_cast<float>(beta2);
  options.shard.hyper.eps = static_cast<float>(eps);
  options.shard.hyper.weight_decay = static_cast<float>(weight_decay);
  options.shard.hyper.max_grad_norm = static_cast<float>(max_grad_norm);
  options.shard.return_path.codec = ParsePullCodec(pull_codec).value();  // FlagSet checked it
  options.shard.return_path.bits = static_cast<int>(pull_bits);
  options.shard.return_path.block_size = static_cast<int>(pull_block);
  options.shard.return_path.full_sync_every = static_cast<uint64_t>(full_sync_every);
  options.shard.max_pull_wait = std::chrono::milliseconds(max_pull_wait_ms);
  options.shard.straggler_slack = static_cast<uint32_t>(straggler_slack);
  options.shard.apply_threads = apply_threads > 0 ? static_cast<uint32_t>(apply_threads)
                                                  : std::clamp(UsableCpus(), 1u, 4u);
  options.checkpoint.dir = checkpoint_dir;
  options.checkpoint.every = static_cast<uint64_t>(checkpoint_every);
  options.checkpoint.keep = static_cast<uint32_t>(checkpoint_keep);
  options.metrics.enabled = metrics_port > 0;
  options.metrics.host = metrics_host;
  options.metrics.port = static_cast<int>(metrics_port);
  options.security = security;
  if (health_port > 0) options.health_port = static_cast<int>(health_port);
  if (coordinator.empty()) {
    std::cerr << "loco-server: --coordinator (or $LOCO_COORDINATOR) is required: the "
                 "coordinator's host:port\n";
    return 2;
  }
  if (Status s = ParameterServer::ValidateOptions(options); !s.ok()) {
    std::cerr << "loco-server: " << s.message() << "\n";
    return 2;
  }
  if (Status s = CheckGrpcServerFlags(port, health_port); !s.ok()) {
    std::cerr << "loco-server: " << s.message() << "\n";
    return 2;
  }
  // Reads the TLS files and the token now, so that a bad file is a usage
  // error (exit 2) named before anything starts.
  if (auto loaded = TransportSecurity::Load(security, TransportRole::kServerAndClient);
      !loaded.ok()) {
    std::cerr << "loco-server: " << loaded.status().message() << "\n";
    return 2;
  }
  SetLogTag("server-" + std::to_string(shard_id));
  if (Status s = TerminationWatch::Install(); !s.ok()) {
    LOG_ERROR(s.ToString());
    return 1;
  }

  ParameterServer server(options);
  auto bound = server.Start();
  if (!bound.ok()) {
    LOG_ERROR("cannot start: " << bound.status().ToString());
    return 1;
  }
  // Before LISTENING, so that a launcher reading up to LISTENING sees it.
  if (server.restored_version()) {
    std::cout << "RESTORED version=" << *server.restored_version() << " "
              << server.restored_from() << std::endl;
  }
  std::cout << "LISTENING " << server.address() << std::endl;
  if (server.metrics_port() > 0) {
    std::cout << "METRICS " << JoinHostPort(metrics_host, server.metrics_port()) << std::endl;
  }
  int sig = TerminationWatch::Wait([&server] { return !server.fatal_status().ok(); });
  const Status fatal = server.fatal_status();
  if (sig != 0) LOG_INFO("signal " << sig << " received; shutting down");
  server.Shutdown(std::chrono::milliseconds(shutdown_ms));
  if (!fatal.ok()) {
    LOG_ERROR("exiting: " << fatal.ToString());
    return 1;
  }
  return 0;
}

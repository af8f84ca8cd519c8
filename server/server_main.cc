// loco-server: the parameter server for one shard. Prints
// "LISTENING host:port" once serving (then "METRICS host:port" when
// --metrics-port is set); exits 0 on SIGINT/SIGTERM, 2 on invalid
// flags, 1 when it cannot start or cannot register with the coordinator.
// A shard that resumed from a checkpoint first prints
// "RESTORED version=<v> <file>"; on SIGTERM it writes a final checkpoint.
#include <sched.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "common/adamw_limits.h"
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
#include "server/parameter_server.h"

namespace loco {
namespace {

// Every flag's value as parsed, before OptionsFromFlags gives them their
// types and units.
struct ServerFlags {
  std::string host, coordinator, advertise_address;
  int64_t port = 0, shard_id = 0, num_servers = 0;
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, max_grad_norm = 0;
  std::string pull_codec;
  int64_t pull_bits = 0, pull_block_size = 0, full_sync_every = 0;
  int64_t max_message_mb = 0, stream_window_kb = 0;
  GrpcServerFlags grpc;
  int64_t step_poll_ms = 0, max_pull_wait_ms = 0, coordinator_timeout_ms = 0;
  int64_t register_timeout_s = 0, reregister_ms = 0, shutdown_timeout_ms = 0;
  std::string metrics_host;
  int64_t metrics_port = 0;
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0, checkpoint_keep = 0;
  int64_t straggler_slack = 0, apply_threads = 0, malloc_arenas = 0;
  TransportSecurityOptions security;
  bool check_flags = false;
};

// The Define*Flags below register the flags in the order --help and the
// README's configuration table list them.

void DefineAddressFlags(FlagSet& flags, ServerFlags* values) {
  flags.AddString("host", "LOCO_HOST", "127.0.0.1", "address to listen on", CheckHost,
                  &values->host);
  flags.AddInt("port", "LOCO_PORT", 0, 0, 65535, "port to listen on (0 = any free port)",
               &values->port);
  flags.AddInt("shard-id", "LOCO_SHARD_ID", 0, 0, 65535, "the shard this server owns",
               &values->shard_id);
  flags.AddInt("num-servers", "LOCO_NUM_SERVERS", 0, 0, 65536,
               "number of shards, checked against the coordinator (0 = take the coordinator's)",
               &values->num_servers);
  flags.AddString("coordinator", "LOCO_COORDINATOR", "", "coordinator address host:port (required)",
                  CheckHostPort, &values->coordinator);
  flags.AddString("advertise-address", "LOCO_ADVERTISE_ADDRESS", "",
                  "host:port workers use to reach this server (default: host:bound port)",
                  CheckHostPort, &values->advertise_address);
}

// AdamW needs beta2 < 1, and the shard computes with it as a float: the
// largest float below 1 (0.99999994) is the largest beta2 it can take.
constexpr float kMaxBeta2 = 1.0f - 0x1p-24f;

void DefineOptimizerFlags(FlagSet& flags, ServerFlags* values) {
  // The AdamW flags are the defaults of the steps whose pushes carry no
  // hyper-parameters of their own (PushRequest.hyper). The shard computes
  // with them as floats (ShardOptionsFromFlags), so their ranges are
  // checked on the values rounded to float.
  flags.AddFloat("lr", "LOCO_LR", 1e-3, kLearningRateRange,
                 "AdamW learning rate of pushes that carry no hyper-parameters", &values->lr);
  flags.AddFloat("beta1", "LOCO_BETA1", 0.9, {.min = 0, .max = 0.999999f},
                 "AdamW beta1 of pushes that carry no hyper-parameters", &values->beta1);
  flags.AddFloat("beta2", "LOCO_BETA2", 0.999, {.min = 0, .max = kMaxBeta2},
                 "AdamW beta2 of pushes that carry no hyper-parameters", &values->beta2);
  flags.AddFloat("eps", "LOCO_EPS", 1e-8, {.min = 1e-30f, .max = 1},
                 "AdamW epsilon of pushes that carry no hyper-parameters", &values->eps);
  flags.AddFloat("weight-decay", "LOCO_WEIGHT_DECAY", 0, {.min = 0, .max = 1e3f},
                 "AdamW decoupled weight decay of pushes that carry no hyper-parameters",
                 &values->weight_decay);
  flags.AddFloat("max-grad-norm", "LOCO_MAX_GRAD_NORM", 0, {.min = 0, .max = 1e30f},
                 "clip each shard's mean gradient to this norm (per shard; 0 = off)",
                 &values->max_grad_norm);
}

void DefineReturnPathFlags(FlagSet& flags, ServerFlags* values) {
  flags.AddEnum("pull-codec", "LOCO_PULL_CODEC", "delta", {"fp32", "bf16", "delta"},
                "encoding of pulled parameters: delta = 8-bit parameter deltas with server-side "
                "error feedback and periodic fp32 syncs",
                &values->pull_codec);
  flags.AddInt("pull-bits", "LOCO_PULL_BITS", 8, 2, 8, "bits per delta code (2, 4 or 8)",
               &values->pull_bits);
  flags.AddInt("pull-block-size", "LOCO_PULL_BLOCK_SIZE", 128, 32, 4096,
               "elements per delta scale (multiple of 32)", &values->pull_block_size);
  flags.AddInt("full-sync-every", "LOCO_FULL_SYNC_EVERY", 50, 0, int64_t{1} << 40,
               "with delta pulls, send a full fp32 copy every this many steps (0 = never)",
               &values->full_sync_every);
}

// The transport: gRPC limits, the coordinator's calls, shutdown, /metrics.
void DefineServingFlags(FlagSet& flags, ServerFlags* values) {
  flags.AddInt("max-message-mb", "LOCO_MAX_MESSAGE_MB", 256, 1, 2047,
               "largest gRPC message accepted or sent, MiB", &values->max_message_mb);
  AddGrpcServerFlags(flags, &values->grpc);
  flags.AddInt("stream-window-kb", "LOCO_STREAM_WINDOW_KB",
               ParameterServerOptions().stream_window_bytes / 1024, 0, 1 << 20,
               "HTTP/2 flow-control window of each incoming call, KiB (0 = gRPC's adaptive "
               "window, which lets the transport buffer whole pushes; else at least 64)",
               &values->stream_window_kb);
  flags.AddInt("step-poll-ms", "LOCO_STEP_POLL_MS", 50, 1, 60000,
               "while pushes are pending, how often to ask the coordinator who is still live",
               &values->step_poll_ms);
  flags.AddInt("max-pull-wait-ms", "LOCO_MAX_PULL_WAIT_MS", 60000, 1, 3600000,
               "longest a pull may wait for a version", &values->max_pull_wait_ms);
  flags.AddInt("coordinator-timeout-ms", "LOCO_COORDINATOR_TIMEOUT_MS", 2000, 1, 600000,
               "deadline of each call to the coordinator", &values->coordinator_timeout_ms);
  flags.AddInt("register-timeout-s", "LOCO_REGISTER_TIMEOUT_S", 120, 1, 86400,
               "give up (exit 1) when the coordinator cannot be reached for this long",
               &values->register_timeout_s);
  flags.AddInt("reregister-ms", "LOCO_REREGISTER_MS", 2000, 0, 600000,
               "register again this often after the first time, so that a restarted "
               "coordinator learns the shard map (0 = never)",
               &values->reregister_ms);
  AddShutdownTimeoutFlag(flags, &values->shutdown_timeout_ms);
  AddMetricsEndpointFlags(flags, &values->metrics_host, &values->metrics_port);
}

// Checkpoints, step completion and the server's threads and memory.
void DefineStateAndResourceFlags(FlagSet& flags, ServerFlags* values) {
  flags.AddString("checkpoint-dir", "LOCO_CHECKPOINT_DIR", "",
                  "folder for this shard's checkpoints, created with its parents if missing; "
                  "on start the newest valid one is loaded (empty = no checkpoints)",
                  &values->checkpoint_dir);
  flags.AddInt("checkpoint-every", "LOCO_CHECKPOINT_EVERY", 100, 0, int64_t{1} << 40,
               "write a checkpoint after every this many steps (0 = only on SIGTERM)",
               &values->checkpoint_every);
  flags.AddInt("checkpoint-keep", "LOCO_CHECKPOINT_KEEP", 3, 1, 1000000,
               "newest checkpoints kept per shard", &values->checkpoint_keep);
  flags.AddInt("straggler-slack", "LOCO_STRAGGLER_SLACK", 0, 0, 65535,
               "complete a step once all but this many live participants pushed (0 = wait "
               "for all; a late push is refused and its worker resynchronises)",
               &values->straggler_slack);
  flags.AddInt("apply-threads", "LOCO_APPLY_THREADS", 0, 0, kMaxApplyThreads,
               "threads that decode each step's pushes, run AdamW and encode the return delta "
               "(every worker waits for this; the result is the same for any count; 0 = the "
               "CPUs the server may run on, by its affinity, at most 4)",
               &values->apply_threads);
  flags.AddInt("malloc-arenas", "LOCO_MALLOC_ARENAS", 1, 0, 1024,
               "glibc malloc arenas (0 = glibc's default, 8 per core): each gRPC thread that "
               "receives or answers a shard-sized message otherwise keeps its own arena of "
               "freed buffers, which multiplies the server's resident memory; the server "
               "makes few, large allocations, so one arena costs no measurable time",
               &values->malloc_arenas);
}

void DefineServerFlags(FlagSet& flags, ServerFlags* values) {
  DefineAddressFlags(flags, values);
  DefineOptimizerFlags(flags, values);
  DefineReturnPathFlags(flags, values);
  DefineServingFlags(flags, values);
  DefineStateAndResourceFlags(flags, values);
  AddTransportSecurityFlags(flags, TransportRole::kServerAndClient, &values->security);
  flags.AddBool("check-flags", "", false,
                "check the flags and the TLS and token files they name, then exit: 0 when the "
                "server would start, 2 with the reason otherwise; starts nothing",
                &values->check_flags);
}

// The CPUs this process may run on (its affinity mask: a container's
// cpuset, taskset), which can be fewer than the machine's.
unsigned UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::thread::hardware_concurrency();
}

ShardServiceOptions ShardOptionsFromFlags(const ServerFlags& values) {
  ShardServiceOptions shard;
  shard.shard_id = static_cast<uint32_t>(values.shard_id);
  shard.hyper.lr = static_cast<float>(values.lr);
  shard.hyper.beta1 = static_cast<float>(values.beta1);
  shard.hyper.beta2 = static_cast<float>(values.beta2);
  shard.hyper.eps = static_cast<float>(values.eps);
  shard.hyper.weight_decay = static_cast<float>(values.weight_decay);
  shard.hyper.max_grad_norm = static_cast<float>(values.max_grad_norm);
  shard.return_path.codec = ParsePullCodec(values.pull_codec).value();  // FlagSet checked it
  shard.return_path.bits = static_cast<int>(values.pull_bits);
  shard.return_path.block_size = static_cast<int>(values.pull_block_size);
  shard.return_path.full_sync_every = static_cast<uint64_t>(values.full_sync_every);
  shard.max_pull_wait = std::chrono::milliseconds(values.max_pull_wait_ms);
  shard.straggler_slack = static_cast<uint32_t>(values.straggler_slack);
  shard.apply_threads = values.apply_threads > 0 ? static_cast<uint32_t>(values.apply_threads)
                                                 : std::clamp(UsableCpus(), 1u, 4u);
  return shard;
}

ParameterServerOptions OptionsFromFlags(const ServerFlags& values) {
  ParameterServerOptions options;
  options.host = values.host;
  options.port = static_cast<int>(values.port);
  options.max_message_mb = static_cast<int>(values.max_message_mb);
  options.stream_window_bytes = static_cast<int>(values.stream_window_kb * 1024);
  values.grpc.ApplyTo(&options);
  options.coordinator = values.coordinator;
  options.advertise_address = values.advertise_address;
  options.num_servers = static_cast<uint32_t>(values.num_servers);
  options.step_poll = std::chrono::milliseconds(values.step_poll_ms);
  options.coordinator_rpc_timeout = std::chrono::milliseconds(values.coordinator_timeout_ms);
  options.register_timeout = std::chrono::seconds(values.register_timeout_s);
  options.reregister_interval = std::chrono::milliseconds(values.reregister_ms);
  options.shard = ShardOptionsFromFlags(values);
  options.checkpoint.dir = values.checkpoint_dir;
  options.checkpoint.every = static_cast<uint64_t>(values.checkpoint_every);
  options.checkpoint.keep = static_cast<uint32_t>(values.checkpoint_keep);
  options.metrics = MetricsEndpointOptionsFromFlags(values.metrics_host, values.metrics_port);
  options.security = values.security;
  return options;
}

// Why the settings ignore a return-path flag: only the delta codec
// quantizes (--pull-bits, --pull-block-size) and sends full copies between
// deltas (--full-sync-every); empty when it is the codec.
std::string IgnoredUnlessDelta(const ServerFlags& values) {
  if (values.pull_codec == "delta") return "";
  return "only --pull-codec delta uses it (this run is --pull-codec " + values.pull_codec +
         ", which sends every pull the " + (values.pull_codec == "fp32" ? "fp32" : "bf16") +
         " parameters)";
}

// Checkpoints are written only into a --checkpoint-dir.
std::string IgnoredWithoutCheckpoints(const ServerFlags& values) {
  return values.checkpoint_dir.empty()
             ? "only --checkpoint-dir turns checkpoints on (this run writes none)"
             : "";
}

// The flags that the other settings would ignore (CheckFlagsTakeEffect: a
// typed one is refused, one from the environment noted in *notes), in the
// order --help lists them.
Status CheckFlagsApply(const FlagSet& flags, const ServerFlags& values,
                       std::vector<std::string>* notes) {
  const auto delta = [&values] { return IgnoredUnlessDelta(values); };
  const auto checkpoints = [&values] { return IgnoredWithoutCheckpoints(values); };
  return CheckFlagsTakeEffect(flags,
                              {{"pull-bits", delta},
                               {"pull-block-size", delta},
                               {"full-sync-every", delta},
                               {"checkpoint-every", checkpoints},
                               {"checkpoint-keep", checkpoints}},
                              notes);
}

// What the flags cannot check one by one: a usage error (exit 2), named
// before anything starts. Reads the TLS files and the token, so that a bad
// file is one too, and looks at --checkpoint-dir, writing nothing.
Status CheckUsage(const FlagSet& flags, const ServerFlags& values,
                  const ParameterServerOptions& options, std::vector<std::string>* notes) {
  if (values.coordinator.empty()) {
    return InvalidArgument(
        "--coordinator (or $LOCO_COORDINATOR) is required: the coordinator's host:port");
  }
  LOCO_RETURN_IF_ERROR(CheckFlagsApply(flags, values, notes));
  LOCO_RETURN_IF_ERROR(CheckLrTimesWeightDecay(flags, values.lr, values.weight_decay));
  LOCO_RETURN_IF_ERROR(ParameterServer::ValidateOptions(options));
  LOCO_RETURN_IF_ERROR(CheckGrpcServerFlags(flags, values.port, values.grpc));
  LOCO_RETURN_IF_ERROR(
      CheckListenerPorts(flags, ServiceListeners(values.host, values.port, values.grpc.health_port,
                                                 values.metrics_host, values.metrics_port)));
  LOCO_RETURN_IF_ERROR(CheckDirectoryFlag(flags.Named("checkpoint-dir"), values.checkpoint_dir,
                                          DirectoryUse::kCreate));
  return TransportSecurity::Load(values.security, TransportRole::kServerAndClient).status();
}

// Starts the server, announces it on stdout and serves until SIGINT/SIGTERM
// or a fatal error; returns the exit code.
int Serve(const ParameterServerOptions& options, std::chrono::milliseconds shutdown_timeout) {
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
  AnnounceListening(std::cout, server.address(), options.metrics.host, server.metrics_port());
  int sig = TerminationWatch::Wait([&server] { return !server.fatal_status().ok(); });
  const Status fatal = server.fatal_status();
  if (sig != 0) LOG_INFO("signal " << sig << " received; shutting down");
  server.Shutdown(shutdown_timeout);
  if (!fatal.ok()) {
    LOG_ERROR("exiting: " << fatal.ToString());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace loco

int main(int argc, char** argv) {
  using namespace loco;
  DisableLockOrderChecks();
  ServerFlags values;
  FlagSet flags("loco-server");
  DefineServerFlags(flags, &values);
  if (std::optional<int> exit_code = flags.ParseCommandLine(argc, argv, std::cout, std::cerr)) {
    return *exit_code;
  }
#ifdef __GLIBC__
  // Before any thread starts: the cap applies to arenas created from now on.
  if (values.malloc_arenas > 0) mallopt(M_ARENA_MAX, static_cast<int>(values.malloc_arenas));
#endif
  const ParameterServerOptions options = OptionsFromFlags(values);
  std::vector<std::string> ignored_from_env;
  if (Status s = CheckUsage(flags, values, options, &ignored_from_env); !s.ok()) {
    std::cerr << "loco-server: " << flags.WithEnvironmentSources(s.message()) << "\n";
    return 2;
  }
  SetLogTag("server-" + std::to_string(values.shard_id));
  for (const std::string& note : ignored_from_env) LOG_WARN(note);
  if (values.check_flags) {
    std::cout << "loco-server: the flags are valid\n";
    return 0;
  }
  if (Status s = TerminationWatch::Install(); !s.ok()) {
    LOG_ERROR(s.ToString());
    return 1;
  }
  return Serve(options, std::chrono::milliseconds(values.shutdown_timeout_ms));
}

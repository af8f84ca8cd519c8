// loco-launch: one command that runs a local LoCo-PS cluster (coordinator,
// S servers, W workers as separate processes on loopback), shows progress and
// ends with the test accuracy and the traffic saved against fp32.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/adamw_limits.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/program_dir.h"
#include "common/transport_security_options.h"
#include "launch/child_argv.h"
#include "launch/child_flags_check.h"
#include "launch/launcher.h"

namespace {

using loco::FlagSet;
using loco::LaunchOptions;
using loco::Status;

volatile std::sig_atomic_t g_interrupted = 0;  // set by the signal handler only
void OnSignal(int) { g_interrupted = 1; }

std::vector<std::string> SplitWords(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// loco-coordinator's --heartbeat-interval-ms default; loco-launch does not
// set it.
constexpr int64_t kCoordinatorHeartbeatIntervalMs = 1000;

// Every flag's value as parsed: most go straight into `options`, the rest
// are checked and converted by OptionsFromFlags.
struct LaunchFlags {
  LaunchOptions options;
  int64_t servers = 0, workers = 0, bits = 0, max_server_restarts = 0;
  std::string progress, server_args, worker_args, faults, summary_json;
  bool prometheus = false;
  std::string prometheus_binary;
  bool print_config = false;
};

// The Define*Flags below register the flags in the order --help and the
// README's configuration table list them.

void DefineTrainingFlags(FlagSet& flags, LaunchFlags* values) {
  LaunchOptions& options = values->options;
  flags.AddInt("servers", "LOCO_SERVERS", 2, 1, 64, "parameter servers (shards) to start", &values->servers);
  flags.AddInt("workers", "LOCO_WORKERS", 4, 1, 64, "workers to start", &values->workers);
  flags.AddInt("epochs", "LOCO_EPOCHS", 2, 1, 1000, "training epochs (ignored when --steps > 0)", &options.epochs);
  flags.AddInt("steps", "LOCO_STEPS", 0, 0, 100000000, "training steps; 0 = epochs x steps per epoch", &options.steps);
  flags.AddInt("global-batch", "LOCO_GLOBAL_BATCH", 256, 1, 1 << 20, "samples per step over all workers", &options.global_batch);
  flags.AddEnum("codec", "LOCO_CODEC", "loco", loco::PushCodecNames(), "push encoding",
                &options.codec);
  flags.AddInt("bits", "LOCO_BITS", 4, 2, 8, "bits per gradient code for naive|ef|loco (2, 4 or 8)", &values->bits);
  flags.AddInt("block-size", "LOCO_BLOCK_SIZE", 256, 32, 4096, "quantization block (multiple of 32)", &options.block_size);
  // Checked as the servers check it (as a float), and handed to them as given.
  flags.AddFloat("lr", "LOCO_LR", 1e-3, loco::kLearningRateRange,
                 "AdamW learning rate on the servers", &options.lr);
  flags.AddString("pull-codec", "LOCO_PULL_CODEC", "", "return path fp32|bf16|delta (empty = server default)", &options.pull_codec);
  flags.AddString("hidden", "LOCO_HIDDEN", "", "MLP hidden sizes, comma separated (empty = worker default)", &options.hidden);
  flags.AddString("data-dir", "LOCO_DATA_DIR", "", "Fashion-MNIST idx directory (empty = worker default)", &options.data_dir);
  flags.AddInt("seed", "LOCO_SEED", 1, 0, INT64_MAX, "model init and data order seed", &options.seed);
  // Above the coordinator's heartbeat interval too: OptionsFromFlags.
  flags.AddInt("heartbeat-timeout-ms", "LOCO_HEARTBEAT_TIMEOUT_MS", 5000, 1, 600000,
               "coordinator drops a silent worker after this (above its heartbeat interval, " +
                   std::to_string(kCoordinatorHeartbeatIntervalMs) + " ms)",
               &options.heartbeat_timeout_ms);
}

void DefineRunFlags(FlagSet& flags, LaunchFlags* values) {
  LaunchOptions& options = values->options;
  flags.AddString("server-args", "LOCO_SERVER_ARGS", "", "extra flags for every loco-server (space separated)", &values->server_args);
  flags.AddString("worker-args", "LOCO_WORKER_ARGS", "", "extra flags for every loco-worker (space separated)", &values->worker_args);
  flags.AddString("bin-dir", "LOCO_BIN_DIR", "", "directory of loco-coordinator/loco-server/loco-worker (empty = next to loco-launch)", &options.bin_dir);
  flags.AddString("log-dir", "LOCO_LOG_DIR", "", "directory for the children's logs (empty = a new /tmp/loco-launch.XXXXXX)", &options.log_dir);
  flags.AddEnum("progress", "LOCO_PROGRESS", "auto", {"auto", "bar", "plain", "none"}, "progress display (auto = bar on a terminal)", &values->progress);
  flags.AddInt("progress-period-ms", "LOCO_PROGRESS_PERIOD_MS", 2000, 100, 600000, "time between progress updates", &options.progress_period_ms);
  flags.AddInt("timeout-s", "LOCO_TIMEOUT_S", 3600, 1, 864000, "stop everything and fail after this long", &options.timeout_s);
}

void DefineFaultFlags(FlagSet& flags, LaunchFlags* values) {
  LaunchOptions& options = values->options;
  flags.AddString("fault", "LOCO_FAULT", "",
                  "fault scenarios, comma separated or repeated: kill-worker@STEP[:INDEX], "
                  "kill-server@STEP[:SHARD] (restarted from its checkpoint), join-worker@STEP (one "
                  "more worker, started at launch, joins when the cluster reaches STEP), "
                  "kill-coordinator@STEP[:DELAY_MS] (restarted on its port after DELAY_MS, "
                  "default 1000; the coordinator then gets a fixed port and a --state-dir in "
                  "LOG_DIR, which keeps its ticket key)",
                  &values->faults);
  flags.AddString("checkpoint-dir", "LOCO_CHECKPOINT_DIR", "",
                  "servers' checkpoint folder (empty = none, or LOG_DIR/checkpoints when a "
                  "kill-server fault needs one)",
                  &options.checkpoint_dir);
  flags.AddInt("checkpoint-every", "LOCO_CHECKPOINT_EVERY", 0, 0, int64_t{1} << 40,
               "servers checkpoint every this many steps (0 = the server's default)",
               &options.checkpoint_every);
  flags.AddInt("max-server-restarts", "LOCO_MAX_SERVER_RESTARTS", 3, 0, 1000,
               "crashed servers are restarted at most this many times per run", &values->max_server_restarts);
}

void DefineOutputFlags(FlagSet& flags, LaunchFlags* values) {
  flags.AddString("summary-json", "LOCO_SUMMARY_JSON", "", "write the final figures as one JSON object to this file", &values->summary_json);
  flags.AddBool("prometheus", "LOCO_PROMETHEUS", false, "start a local Prometheus that scrapes every process and print its URL", &values->prometheus);
  flags.AddString("prometheus-binary", "LOCO_PROMETHEUS_BINARY", "prometheus", "the prometheus executable for --prometheus (name on PATH or path)", &values->prometheus_binary);
}

void DefineLaunchFlags(FlagSet& flags, LaunchFlags* values) {
  DefineTrainingFlags(flags, values);
  DefineRunFlags(flags, values);
  DefineFaultFlags(flags, values);
  DefineOutputFlags(flags, values);
  // The children's transport security; see OptionsFromFlags.
  values->options.security = loco::TransportSecurityOptions();
  loco::AddTransportSecurityFlags(flags, loco::TransportRole::kServerAndClient,
                                  &values->options.security);
  flags.AddBool("print-config-markdown", "", false, "print the configuration table rows and exit", &values->print_config);
}

// argv without argv[0], every --fault joined into one comma list (--fault
// may be repeated; FlagSet keeps the last of a repeated flag).
std::vector<std::string> ArgsWithFaultsJoined(int argc, char** argv) {
  std::vector<std::string> args;
  std::string fault_list;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--fault=", 0) == 0 || (arg == "--fault" && i + 1 < argc)) {
      const std::string value = arg == "--fault" ? std::string(argv[++i]) : arg.substr(8);
      fault_list += (fault_list.empty() ? "" : ",") + value;
      continue;
    }
    args.push_back(arg);
  }
  if (!fault_list.empty()) args.push_back("--fault=" + fault_list);
  return args;
}

// --bits and --block-size reach the workers with a block codec only
// (WorkerArgv): typed with fp32 or bf16 they are refused, as loco-worker
// refuses them; from the environment, which the workers inherit and note
// themselves, they pass.
Status CheckCodecFlagsApply(const FlagSet& flags, const std::string& codec) {
  const auto blocks = [&codec] {
    return loco::QuantizesToBits(codec)
               ? std::string()
               : "only the block codecs (--codec naive, ef or loco) use it; --codec " + codec +
                     " sends every element at full precision";
  };
  std::vector<std::string> from_environment;
  return loco::CheckFlagsTakeEffect(flags, {{"bits", blocks}, {"block-size", blocks}},
                                    &from_environment);
}

// What the flags cannot check one by one, and the options they add up to.
// InvalidArgument is a usage error (exit 2).
Status OptionsFromFlags(const FlagSet& flags, const LaunchFlags& values, LaunchOptions* options) {
  if (values.bits != 2 && values.bits != 4 && values.bits != 8) {
    return loco::InvalidArgument("invalid value '" + std::to_string(values.bits) + "' for " +
                                 flags.Named("bits") + ": expected 2, 4 or 8");
  }
  if (values.options.block_size % 32 != 0) {
    return loco::InvalidArgument("invalid value '" + std::to_string(values.options.block_size) +
                                 "' for " + flags.Named("block-size") +
                                 ": expected a multiple of 32 in [32, 4096]");
  }
  LOCO_RETURN_IF_ERROR(CheckCodecFlagsApply(flags, values.options.codec));
  // The coordinator refuses a timeout that is not above its heartbeat
  // interval, which loco-launch leaves at its default.
  if (values.options.heartbeat_timeout_ms <= kCoordinatorHeartbeatIntervalMs) {
    return loco::InvalidArgument(
        "invalid value '" + std::to_string(values.options.heartbeat_timeout_ms) + "' for " +
        flags.Origin("heartbeat-timeout-ms") + ": the workers heartbeat every " +
        std::to_string(kCoordinatorHeartbeatIntervalMs) +
        " ms (the coordinator's --heartbeat-interval-ms, which loco-launch leaves at its "
        "default), and the coordinator takes only a timeout above that; expected an integer in [" +
        std::to_string(kCoordinatorHeartbeatIntervalMs + 1) + ", 600000]");
  }
  if (!values.summary_json.empty()) {
    if (Status s = loco::CheckSummaryJsonPath(values.summary_json); !s.ok()) {
      return loco::InvalidArgument("invalid value '" + values.summary_json + "' for " +
                                   flags.Origin("summary-json") + ": " + s.message());
    }
  }
  *options = values.options;
  // The children inherit this environment, so a worker setting read from it
  // reaches the workers by itself. Forwarded as a typed flag it would become
  // one a worker refuses when its model ignores it (--worker-args
  // --model=charlm with LOCO_HIDDEN set), where the worker only warns about
  // an environment value.
  if (flags.Source("hidden") == loco::FlagSource::kEnvironment) options->hidden.clear();
  if (flags.Source("data-dir") == loco::FlagSource::kEnvironment) options->data_dir.clear();
  LOCO_RETURN_IF_ERROR(loco::CheckSharedEnvironment(
      [](const char* name) -> const char* { return std::getenv(name); }));
  // A local cluster on loopback: plaintext unless TLS material was given
  // (then it is forwarded to every child instead).
  if (!options->security.has_tls_material()) options->security.insecure = true;
  LOCO_RETURN_IF_ERROR(loco::ValidateTransportSecurityOptions(
      options->security, loco::TransportRole::kServerAndClient));
  auto faults = loco::ParseFaults(values.faults);
  if (!faults.ok()) return faults.status();
  options->faults = std::move(faults).value();
  options->max_server_restarts = static_cast<int>(values.max_server_restarts);
  if (values.prometheus) {
    auto binary = loco::LocalPrometheus::FindBinary(values.prometheus_binary);
    if (!binary.ok()) return loco::InvalidArgument("--prometheus: " + binary.status().message());
    options->prometheus_binary = *binary;
  }
  options->servers = static_cast<int>(values.servers);
  options->workers = static_cast<int>(values.workers);
  LOCO_RETURN_IF_ERROR(loco::CheckFaultsFit(options->faults, options->servers, options->workers,
                                            static_cast<uint64_t>(options->steps)));
  options->bits = values.bits;
  options->server_args = SplitWords(values.server_args);
  options->worker_args = SplitWords(values.worker_args);
  if (options->bin_dir.empty()) options->bin_dir = loco::ProgramDir();
  for (const char* program : {"loco-coordinator", "loco-server", "loco-worker"}) {
    const std::string path = options->bin_dir + "/" + program;
    if (::access(path.c_str(), X_OK) != 0) {
      const std::string origin = flags.Origin("bin-dir");
      return loco::InvalidArgument((origin.empty() ? "the folder of loco-launch, " : origin + " ") +
                                   options->bin_dir + ", has no " + program +
                                   " to run; expected the folder of the built programs "
                                   "(build/bin; scripts/build.sh builds them)");
    }
  }
  std::string progress = values.progress;
  if (progress == "auto") progress = ::isatty(1) ? "bar" : "plain";
  options->progress = progress == "bar"     ? loco::ProgressView::Mode::kBar
                      : progress == "plain" ? loco::ProgressView::Mode::kPlain
                                            : loco::ProgressView::Mode::kNone;
  return Status::Ok();
}

// Runs the cluster and prints (and with --summary-json writes) the final
// figures; returns the exit code.
int RunCluster(const LaunchOptions& options, const std::string& summary_json) {
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  std::printf("loco-launch: coordinator + %d server%s + %d worker%s, codec %s%s, logs in %s\n",
              options.servers, options.servers == 1 ? "" : "s", options.workers,
              options.workers == 1 ? "" : "s", options.codec.c_str(),
              loco::QuantizesToBits(options.codec)
                  ? (" " + std::to_string(options.bits) + "-bit").c_str()
                  : "",
              options.log_dir.c_str());
  std::fflush(stdout);
  loco::LaunchSummary summary;
  loco::Launcher launcher(options, &g_interrupted);
  if (Status s = launcher.Run(&summary); !s.ok()) {
    // InvalidArgument: a setting that cannot be used (nothing was started).
    if (s.code() == loco::StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "loco-launch: %s\n", s.message().c_str());
      return 2;
    }
    std::fprintf(stderr, "loco-launch: FAILED: %s\n", s.message().c_str());
    return g_interrupted ? 130 : 1;
  }
  std::printf("%s", summary.ToText().c_str());
  if (!summary_json.empty()) {
    if (Status s = loco::WriteSummaryJson(summary, options, summary_json); !s.ok()) {
      std::fprintf(stderr, "loco-launch: --summary-json: %s\n", s.message().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  loco::SetLogTag("launch");
  LaunchFlags values;
  FlagSet flags("loco-launch");
  DefineLaunchFlags(flags, &values);
  bool help = false;
  if (Status s = flags.Parse(ArgsWithFaultsJoined(argc, argv),
                             [](const char* name) { return std::getenv(name); }, &help);
      !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 2;
  }
  if (help) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (values.print_config) {
    std::printf("%s", flags.MarkdownRows().c_str());
    return 0;
  }
  LaunchOptions options;
  if (Status s = OptionsFromFlags(flags, values, &options); !s.ok()) {
    std::fprintf(stderr, "loco-launch: %s\n", flags.WithEnvironmentSources(s.message()).c_str());
    return 2;
  }
  // Before the log folder is made or anything printed: a refused launch
  // leaves nothing behind.
  if (Status s = loco::PreflightChildFlags(options); !s.ok()) {
    std::fprintf(stderr, "loco-launch: %s\n", s.message().c_str());
    return s.code() == loco::StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (options.log_dir.empty()) {
    char log_dir[] = "/tmp/loco-launch.XXXXXX";
    if (::mkdtemp(log_dir) == nullptr) {
      std::perror("loco-launch: mkdtemp");
      return 1;
    }
    options.log_dir = log_dir;
  }
  return RunCluster(options, values.summary_json);
}

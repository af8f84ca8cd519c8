// loco-launch: one command that runs a local LoCo-PS cluster (coordinator,
// S servers, W workers as separate processes on loopback), shows progress and
// ends with the test accuracy and the traffic saved against fp32.
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/flags.h"
#include "common/log.h"
#include "common/transport_security_options.h"
#include "launch/launcher.h"

namespace {

volatile std::sig_atomic_t g_interrupted = 0;  // set by the signal handler only
void OnSignal(int) { g_interrupted = 1; }

std::vector<std::string> SplitWords(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string SelfDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

}  // namespace

int main(int argc, char** argv) {
  loco::SetLogTag("launch");
  loco::LaunchOptions o;
  int64_t servers = 0, workers = 0, bits = 0;
  std::string progress, server_args, worker_args, summary_json, print_md, faults;
  int64_t max_server_restarts = 0;
  bool print_config = false;
  loco::FlagSet flags("loco-launch");
  flags.AddInt("servers", "LOCO_SERVERS", 2, 1, 64, "parameter servers (shards) to start", &servers);
  flags.AddInt("workers", "LOCO_WORKERS", 4, 1, 64, "workers to start", &workers);
  flags.AddInt("epochs", "LOCO_EPOCHS", 2, 1, 1000, "training epochs (ignored when --steps > 0)", &o.epochs);
  flags.AddInt("steps", "LOCO_STEPS", 0, 0, 100000000, "training steps; 0 = epochs x steps per epoch", &o.steps);
  flags.AddInt("global-batch", "LOCO_GLOBAL_BATCH", 256, 1, 1 << 20, "samples per step over all workers", &o.global_batch);
  flags.AddEnum("codec", "LOCO_CODEC", "loco", {"fp32", "bf16", "naive", "ef", "loco"}, "push encoding", &o.codec);
  flags.AddInt("bits", "LOCO_BITS", 4, 2, 8, "bits per gradient code for naive|ef|loco (2, 4 or 8)", &bits);
  flags.AddInt("block-size", "LOCO_BLOCK_SIZE", 256, 32, 4096, "quantization block (multiple of 32)", &o.block_size);
  flags.AddDouble("lr", "LOCO_LR", 1e-3, 0, 10, "AdamW learning rate on the servers", &o.lr);
  flags.AddString("pull-codec", "LOCO_PULL_CODEC", "", "return path fp32|bf16|delta (empty = server default)", &o.pull_codec);
  flags.AddString("hidden", "LOCO_HIDDEN", "", "MLP hidden sizes, comma separated (empty = worker default)", &o.hidden);
  flags.AddString("data-dir", "LOCO_DATA_DIR", "", "Fashion-MNIST idx directory (empty = worker default)", &o.data_dir);
  flags.AddInt("seed", "LOCO_SEED", 1, 0, INT64_MAX, "model init and data order seed", &o.seed);
  flags.AddInt("heartbeat-timeout-ms", "LOCO_HEARTBEAT_TIMEOUT_MS", 5000, 100, 600000, "coordinator drops a silent worker after this", &o.heartbeat_timeout_ms);
  flags.AddString("server-args", "LOCO_SERVER_ARGS", "", "extra flags for every loco-server (space separated)", &server_args);
  flags.AddString("worker-args", "LOCO_WORKER_ARGS", "", "extra flags for every loco-worker (space separated)", &worker_args);
  flags.AddString("bin-dir", "LOCO_BIN_DIR", "", "directory of loco-coordinator/loco-server/loco-worker (empty = next to loco-launch)", &o.bin_dir);
  flags.AddString("log-dir", "LOCO_LOG_DIR", "", "directory for the children's logs (empty = a new /tmp/loco-launch.XXXXXX)", &o.log_dir);
  flags.AddEnum("progress", "LOCO_PROGRESS", "auto", {"auto", "bar", "plain", "none"}, "progress display (auto = bar on a terminal)", &progress);
  flags.AddInt("progress-period-ms", "LOCO_PROGRESS_PERIOD_MS", 2000, 100, 600000, "time between progress updates", &o.progress_period_ms);
  flags.AddInt("timeout-s", "LOCO_TIMEOUT_S", 3600, 1, 864000, "stop everything and fail after this long", &o.timeout_s);
  flags.AddString("fault", "LOCO_FAULT", "",
                  "fault scenarios, comma separated or repeated: kill-worker@STEP[:INDEX], "
                  "kill-server@STEP[:SHARD] (restarted from its checkpoint), join-worker@STEP (one "
                  "more worker, started at launch, joins when the cluster reaches STEP)",
                  &faults);
  flags.AddString("checkpoint-dir", "LOCO_CHECKPOINT_DIR", "",
                  "servers' checkpoint folder (empty = none, or LOG_DIR/checkpoints when a "
                  "kill-server fault needs one)",
                  &o.checkpoint_dir);
  flags.AddInt("checkpoint-every", "LOCO_CHECKPOINT_EVERY", 0, 0, int64_t{1} << 40,
               "servers checkpoint every this many steps (0 = the server's default)",
               &o.checkpoint_every);
  flags.AddInt("max-server-restarts", "LOCO_MAX_SERVER_RESTARTS", 3, 0, 1000,
               "crashed servers are restarted at most this many times per run", &max_server_restarts);
  flags.AddString("summary-json", "LOCO_SUMMARY_JSON", "", "write the final figures as one JSON object to this file", &summary_json);
  bool prometheus = false;
  std::string prometheus_binary;
  flags.AddBool("prometheus", "LOCO_PROMETHEUS", false, "start a local Prometheus that scrapes every process and print its URL", &prometheus);
  flags.AddString("prometheus-binary", "LOCO_PROMETHEUS_BINARY", "prometheus", "the prometheus executable for --prometheus (name on PATH or path)", &prometheus_binary);
  // The children's transport security; see the check after parsing.
  o.security = loco::TransportSecurityOptions();
  loco::AddTransportSecurityFlags(flags, loco::TransportRole::kServerAndClient, &o.security);
  flags.AddBool("print-config-markdown", "", false, "print the configuration table rows and exit", &print_config);
  bool help = false;
  // --fault may be repeated: join every occurrence into one comma list.
  std::vector<std::string> args;
  std::string fault_list;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--fault=", 0) == 0 || (a == "--fault" && i + 1 < argc)) {
      const std::string v = a == "--fault" ? std::string(argv[++i]) : a.substr(8);
      fault_list += (fault_list.empty() ? "" : ",") + v;
      continue;
    }
    args.push_back(a);
  }
  if (!fault_list.empty()) args.push_back("--fault=" + fault_list);
  loco::Status st = flags.Parse(args, [](const char* n) { return std::getenv(n); }, &help);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 2;
  }
  if (help) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (print_config) {
    std::printf("%s", flags.MarkdownRows().c_str());
    return 0;
  }
  if (bits != 2 && bits != 4 && bits != 8) {
    std::fprintf(stderr, "loco-launch: invalid value '%lld' for --bits: expected 2, 4 or 8\n", (long long)bits);
    return 2;
  }
  if (o.block_size % 32 != 0) {
    std::fprintf(stderr, "loco-launch: invalid value '%lld' for --block-size: expected a multiple of 32 in [32, 4096]\n", (long long)o.block_size);
    return 2;
  }
  // A local cluster on loopback: plaintext unless TLS material was given
  // (then it is forwarded to every child instead).
  if (!o.security.has_tls_material()) o.security.insecure = true;
  if (loco::Status s = loco::ValidateTransportSecurityOptions(
          o.security, loco::TransportRole::kServerAndClient);
      !s.ok()) {
    std::fprintf(stderr, "loco-launch: %s\n", s.message().c_str());
    return 2;
  }
  auto parsed_faults = loco::ParseFaults(faults);
  if (!parsed_faults.ok()) {
    std::fprintf(stderr, "loco-launch: %s\n", parsed_faults.status().message().c_str());
    return 2;
  }
  o.faults = std::move(parsed_faults).value();
  o.max_server_restarts = static_cast<int>(max_server_restarts);
  if (prometheus) {
    auto bin = loco::LocalPrometheus::FindBinary(prometheus_binary);
    if (!bin.ok()) {
      std::fprintf(stderr, "loco-launch: --prometheus: %s\n", bin.status().message().c_str());
      return 2;
    }
    o.prometheus_binary = *bin;
  }
  o.servers = static_cast<int>(servers);
  o.workers = static_cast<int>(workers);
  o.bits = bits;
  o.server_args = SplitWords(server_args);
  o.worker_args = SplitWords(worker_args);
  if (o.bin_dir.empty()) o.bin_dir = SelfDir();
  if (o.log_dir.empty()) {
    char tmpl[] = "/tmp/loco-launch.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      std::perror("loco-launch: mkdtemp");
      return 1;
    }
    o.log_dir = tmpl;
  }
  if (progress == "auto") progress = ::isatty(1) ? "bar" : "plain";
  o.progress = progress == "bar"     ? loco::ProgressView::Mode::kBar
               : progress == "plain" ? loco::ProgressView::Mode::kPlain
                                     : loco::ProgressView::Mode::kNone;

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::printf("loco-launch: coordinator + %d servers + %d workers, codec %s%s, logs in %s\n",
              o.servers, o.workers, o.codec.c_str(),
              (o.codec == "naive" || o.codec == "ef" || o.codec == "loco")
                  ? (" " + std::to_string(o.bits) + "-bit").c_str() : "",
              o.log_dir.c_str());
  std::fflush(stdout);
  loco::LaunchSummary summary;
  loco::Launcher launcher(o, &g_interrupted);
  st = launcher.Run(&summary);
  if (!st.ok()) {
    std::fprintf(stderr, "loco-launch: FAILED: %s\n", st.message().c_str());
    return g_interrupted ? 130 : 1;
  }
  std::printf("%s", summary.ToText().c_str());
  if (!summary_json.empty()) {
    std::ofstream out(summary_json);
    out << summary.ToJson(o) << "\n";
    if (!out) {
      std::fprintf(stderr, "loco-launch: cannot write %s\n", summary_json.c_str());
      return 1;
    }
  }
  return 0;
}

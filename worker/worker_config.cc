#include "worker/worker_config.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "client/worker_options.h"
#include "common/host_port.h"
#include "data/fashion_mnist.h"
#include "data/text_corpus.h"
#include "kernels/device.h"
#include "metrics/metrics_endpoint_flags.h"
#include "worker/group/local_group.h"
#include "worker/group/make_local_group.h"

namespace loco {
namespace {

// The phases of DefineWorkerFlags, one per group of flags, in the order of
// the README's table (FlagSet keeps the order of registration). `d` holds
// WorkerOptions' defaults, which the flags that set them share.

// Where the coordinator is, and the name this worker logs under.
void DefineClusterFlags(FlagSet& f, WorkerConfig* c) {
  f.AddString("coordinator", "LOCO_COORDINATOR", "127.0.0.1:7000", "host:port of the coordinator",
              CheckHostPort, &c->coordinator);
  f.AddString("name", "LOCO_NAME", "", "worker name for logs (default: hostname-pid)", &c->name);
}

// How gradients are encoded for the push (the codec's parameters).
void DefineCodecFlags(FlagSet& f, const WorkerOptions& d, WorkerConfig* c) {
  f.AddEnum("codec", "LOCO_CODEC", PushCodecName(d.codec),
            {"fp32", "bf16", "naive", "ef", "loco"}, "gradient push encoding", &c->codec);
  f.AddInt("bits", "LOCO_BITS", d.bits, 2, 8, "code width of the block codecs (2, 4 or 8)",
           &c->bits);
  f.AddInt("block-size", "LOCO_BLOCK_SIZE", d.block_size, 32, 4096,
           "elements per quantization block of the block codecs (multiple of 32; with "
           "--local-devices > 1 also the unit a shard's slices for the local ranks align to)",
           &c->block_size);
  f.AddDouble("beta", "LOCO_BETA", d.beta, 0.0, 0.999999,
              "LoCo weight on the old error (codec loco)", &c->beta);
  f.AddInt("reset-period", "LOCO_RESET_PERIOD", d.reset_period, 0, 1 << 30,
           "LoCo error reset period in steps, 0 = never (codec loco)", &c->reset_period);
  f.AddInt("error-bits", "LOCO_ERROR_BITS", d.error_bits, 8, 32,
           "error-state storage of codecs ef and loco: 8 (int8 + block scales) or 32 (fp32)",
           &c->error_bits);
  f.AddBool("stochastic-rounding", "LOCO_STOCHASTIC_ROUNDING", d.stochastic_rounding,
            "stochastic instead of nearest rounding in the block codecs",
            &c->stochastic_rounding);
}

// The model and its data set: the seed, the MLP's layers, the char LM's
// shape and validation windows.
void DefineModelFlags(FlagSet& f, WorkerConfig* c) {
  f.AddInt("seed", "LOCO_SEED", 0, 0, INT64_MAX,
           "model init and data order; every worker must use the same seed", &c->seed);
  f.AddString("hidden", "LOCO_HIDDEN", "1024,1024",
              "hidden layer sizes, comma separated (empty: none, a linear model)",
              &c->hidden);
  f.AddEnum("model", "LOCO_MODEL", "mlp", {"mlp", "charlm"},
            "built-in model: mlp (Fashion-MNIST) or charlm (character transformer on a text "
            "corpus)",
            &c->model);
  f.AddString("corpus-dir", "LOCO_CORPUS_DIR", TextCorpus::kDefaultDir,
              "charlm: folder of '%'-separated text files (Debian package fortunes)",
              &c->corpus_dir);
  f.AddInt("lm-layers", "LOCO_LM_LAYERS", 2, 1, 64, "charlm: transformer blocks", &c->lm_layers);
  f.AddInt("lm-channels", "LOCO_LM_CHANNELS", 128, 8, 4096,
           "charlm: model width (a multiple of --lm-heads)", &c->lm_channels);
  f.AddInt("lm-heads", "LOCO_LM_HEADS", 4, 1, 256, "charlm: attention heads", &c->lm_heads);
  f.AddInt("lm-context", "LOCO_LM_CONTEXT", 64, 2, 4096, "charlm: context length in bytes",
           &c->lm_context);
  f.AddInt("eval-windows", "LOCO_EVAL_WINDOWS", 256, 1, 1 << 24,
           "charlm: validation windows per evaluation, spread over the validation text",
           &c->eval_windows);
}

// When the worker evaluates, when it starts or joins, and where it traces.
void DefineScheduleFlags(FlagSet& f, WorkerConfig* c) {
  f.AddInt("eval-every", "LOCO_EVAL_EVERY", 0, 0, 1 << 30,
           "evaluate every N global steps (0 = at data-epoch ends)", &c->eval_every);
  f.AddInt("wait-for-workers", "LOCO_WAIT_FOR_WORKERS", 0, 0, 1 << 20,
           "before the first step, wait (at most --join-timeout-ms) until the cluster has this "
           "many workers, so that the first steps split the batch the same way every run "
           "(0 = start at once)",
           &c->wait_for_workers);
  f.AddInt("join-at-step", "LOCO_JOIN_AT_STEP", 0, 0, INT64_MAX / 2,
           "load the data and build the model first, then wait (polling the cluster's step "
           "every 10 ms, at most --join-wait-timeout-ms) until the cluster reaches this global "
           "step, and join only then, so that a late worker joins at a chosen step rather than "
           "whenever its process is ready; must be below --steps (0 = join at once)",
           &c->join_at_step);
  f.AddInt("join-wait-timeout-ms", "LOCO_JOIN_WAIT_TIMEOUT_MS", 3600000, 1, INT64_MAX / 2,
           "upper bound on the wait of --join-at-step for the cluster to reach that step",
           &c->join_wait_timeout_ms);
  f.AddString("trace-dir", "LOCO_TRACE_DIR", "",
              "append per-step loss to DIR/<name>.csv and evaluations to DIR/<name>-eval.csv "
              "(empty = off)",
              &c->trace_dir);
}

// The batch, and the node's local ranks: how many, where they compute, how
// they reduce.
void DefineDeviceFlags(FlagSet& f, WorkerConfig* c) {
  f.AddInt("global-batch", "LOCO_GLOBAL_BATCH", 256, 1, 1 << 20,
           "samples per step across all workers", &c->global_batch);
  f.AddInt("local-devices", "LOCO_LOCAL_DEVICES", 1, 1, kMaxLocalDevices,
           "local ranks (devices) of this node: replicas of the model whose gradients are "
           "averaged inside the node before ONE payload per shard is pushed (the node is one "
           "worker of the cluster); every node must use the same value",
           &c->local_devices);
  f.AddEnum("device", "LOCO_DEVICE", "cpu", {"cpu", "cuda"},
            "where the local ranks compute: cpu (OpenBLAS threads), or cuda (the MLP with "
            "cuBLAS, local rank r on CUDA device r; with one local device the gradient stays "
            "on it and is LoCo-compressed there, with several it is reduced and compressed on "
            "the host)",
            &c->device);
  f.AddEnum("local-group", "LOCO_LOCAL_GROUP", "auto", {"auto", "cpu", "nccl"},
            "how the local ranks (--local-devices > 1) reduce their gradients and gather the "
            "parameters: cpu (threads, host memory), nccl (NCCL over the CUDA devices; needs "
            "--device cuda and a build with NCCL), auto (nccl when both hold, else cpu)",
            &c->local_group);
}

// How long to train, on which data, with which CPU products, and who
// evaluates and reports.
void DefineRunFlags(FlagSet& f, WorkerConfig* c) {
  f.AddInt("epochs", "LOCO_EPOCHS", 2, 1, 100000, "data epochs to train (when --steps is 0)",
           &c->epochs);
  f.AddInt("steps", "LOCO_STEPS", 0, 0, INT64_MAX / 2,
           "global steps to train; 0 = epochs * ceil(60000 / global-batch)", &c->steps);
  f.AddString("data-dir", "LOCO_DATA_DIR", FashionMnist::kDefaultDir,
              "folder with the Fashion-MNIST *-ubyte.gz files", &c->data_dir);
  f.AddInt("blas-threads", "LOCO_BLAS_THREADS", 1, 1, 256, "OpenBLAS threads", &c->blas_threads);
  f.AddEnum("cpu-products", "LOCO_CPU_PRODUCTS", "auto", {"auto", "openblas"},
            "the CPU MLP's matrix products: auto (a large layer's products for a batch of at "
            "most 64 rows per rank on an AVX-512 CPU, 32 on AVX2, on one BLAS thread, run on "
            "built-in loops that read the weights in place; everything else on OpenBLAS), "
            "openblas (all on OpenBLAS)",
            &c->cpu_products);
  f.AddEnum("eval", "LOCO_EVAL", "rank0", {"rank0", "all", "none"},
            "who computes test accuracy at epoch ends and at the end", &c->eval);
  f.AddInt("report-every", "LOCO_REPORT_EVERY", 1, 1, 1 << 30,
           "print a step event every N steps", &c->report_every);
}

// The RPCs: deadlines, retries, and how pushes and pulls are sent.
void DefineRpcFlags(FlagSet& f, const WorkerOptions& d, WorkerConfig* c) {
  f.AddInt("rpc-timeout-ms", "LOCO_RPC_TIMEOUT_MS", d.rpc_timeout_ms, 1, 3600000,
           "deadline of one RPC (InitShard, a full fp32 shard: the larger of this and "
           "--step-timeout-ms)",
           &c->rpc_timeout_ms);
  f.AddInt("pull-wait-ms", "LOCO_PULL_WAIT_MS", d.pull_wait_ms, 0, 3600000,
           "how long one pull waits on the server for the next version", &c->pull_wait_ms);
  f.AddInt("step-timeout-ms", "LOCO_STEP_TIMEOUT_MS", d.step_timeout_ms, 1, 86400000,
           "upper bound on one step's wait for the shards", &c->step_timeout_ms);
  f.AddInt("join-timeout-ms", "LOCO_JOIN_TIMEOUT_MS", d.join_timeout_ms, 1, 86400000,
           "upper bound on the wait for the cluster to be ready", &c->join_timeout_ms);
  f.AddInt("max-retries", "LOCO_MAX_RETRIES", d.max_retries, 0, 1000,
           "retries of an RPC refused with UNAVAILABLE", &c->max_retries);
  f.AddInt("coordinator-outage-ms", "LOCO_COORDINATOR_OUTAGE_MS", d.coordinator_outage_ms, 0,
           86400000,
           "how long a join keeps retrying while the coordinator is unreachable (a restart)",
           &c->coordinator_outage_ms);
  f.AddInt("push-chunk-bytes", "LOCO_PUSH_CHUNK_BYTES",
           static_cast<int64_t>(d.push_chunk_bytes), 0, int64_t{64} << 20,
           "send each push as a stream of chunks of at most this many data bytes (0 = one "
           "unary Push; else at least 4096)",
           &c->push_chunk_bytes);
  f.AddBool("push-parts", "LOCO_PUSH_PARTS", d.push_parts,
            "with --overlap-backward and chunks: send each part of a shard as soon as the "
            "backward pass has made it final, instead of the whole shard once it is; false = "
            "whole shards",
            &c->push_parts);
  f.AddBool("pull-parts", "LOCO_PULL_PARTS", d.pull_parts,
            "open each step's pull as a stream before the push, so that the server sends the "
            "answer's parts (delta or bf16) while its step computes them; false = one unary "
            "pull after the push is answered",
            &c->pull_parts);
  f.AddBool("ordered-pushes", "LOCO_ORDERED_PUSHES", d.ordered_pushes,
            "send one shard's push at a time, the last shard first (the backward pass makes "
            "it final first), so that its server steps and its answer comes down while the "
            "other shards still go up; false = every shard's push at once, sharing the uplink",
            &c->ordered_pushes);
}

// The Prometheus /metrics endpoint.
void DefineMetricsFlags(FlagSet& f, WorkerConfig* c) {
  AddMetricsEndpointFlags(f, &c->metrics_host, &c->metrics_port);
}

// How a step overlaps the backward pass with the pushes, and what its event
// reports.
void DefineStepFlags(FlagSet& f, WorkerConfig* c) {
  f.AddBool("overlap-backward", "LOCO_OVERLAP_BACKWARD", true,
            "push each shard as soon as its part of the gradient is final, while the rest "
            "of the backward pass runs (MLP; one device per process); false = compute the "
            "whole gradient first",
            &c->overlap_backward);
  f.AddEnum("ready-granularity", "LOCO_READY_GRANULARITY", "panel", {"panel", "tensor"},
            "with --overlap-backward, when the CPU MLP's backward pass says a part of the "
            "gradient is final: panel (after each panel of rows of a weight gradient, before "
            "the layer's input gradient: the earliest), tensor (once per layer, after its "
            "weight and input gradients, as torch's autograd reports a parameter: to compare "
            "like with like against the Python layer); the gradient is the same either way; "
            "refused where nothing reports readiness (the char LM, --device cuda, "
            "--overlap-backward=false, --local-devices > 1)",
            &c->ready_granularity);
  f.AddBool("report-params-crc", "LOCO_REPORT_PARAMS_CRC", false,
            "add the CRC-32 of the parameters each gradient was computed at to every step "
            "event (to check that every copy agrees)",
            &c->report_params_crc);
}

// Why `c` ignores the flags that apply to some settings only: empty when
// they apply. One function per group of flags, each building on the last.

// The push codec's settings (client/gradient_encoder.cc,
// kernels/loco_compress.h): the block codecs (naive, ef, loco) quantize in
// blocks of --block-size to --bits-bit codes, rounded as
// --stochastic-rounding says; fp32 and bf16 send every element as it is.
std::string IgnoredUnlessBlockCodec(const WorkerConfig& c) {
  if (c.codec == "naive" || c.codec == "ef" || c.codec == "loco") return "";
  return "only the block codecs (--codec naive, ef or loco) use it; --codec " + c.codec +
         " sends every element " + (c.codec == "fp32" ? "as a 32-bit float" : "rounded to bf16");
}

// --block-size also aligns the slices a shard is cut into for several local
// ranks (worker/group/local_group.h, SlicesForShards), whatever the codec.
std::string IgnoredUnlessBlocksOrLocalRanks(const WorkerConfig& c) {
  return c.local_devices > 1 ? "" : IgnoredUnlessBlockCodec(c);
}

// ef and loco keep an error state, stored in --error-bits; naive keeps none.
std::string IgnoredUnlessErrorState(const WorkerConfig& c) {
  if (std::string why = IgnoredUnlessBlockCodec(c); !why.empty()) return why;
  return c.codec != "naive" ? ""
                            : "only the codecs with an error state (--codec ef or loco) use it; "
                              "--codec naive keeps none";
}

// Only loco weighs the old error by --beta and resets it every
// --reset-period steps; ef is classic error feedback (beta 0, no reset).
std::string IgnoredUnlessLoco(const WorkerConfig& c) {
  if (std::string why = IgnoredUnlessErrorState(c); !why.empty()) return why;
  return c.codec == "loco" ? ""
                           : "only --codec loco uses it; --codec ef is classic error feedback "
                             "(the whole error is kept, never reset)";
}

std::string IgnoredUnlessCharLm(const WorkerConfig& c) {
  return c.model == "charlm" ? "" : "only --model charlm uses it (this run is --model " +
                                        c.model + ")";
}

std::string IgnoredUnlessMlp(const WorkerConfig& c) {
  return c.model == "mlp" ? "" : "only --model mlp uses it (this run is --model " + c.model + ")";
}

std::string IgnoredUnlessCpuMlp(const WorkerConfig& c) {
  if (std::string why = IgnoredUnlessMlp(c); !why.empty()) return why;
  return c.device == "cpu" ? "" : "only --device cpu uses it (--device cuda computes with cuBLAS)";
}

std::string IgnoredUnlessOverlappedCpuMlp(const WorkerConfig& c) {
  if (std::string why = IgnoredUnlessCpuMlp(c); !why.empty()) return why;
  if (!c.overlap_backward) return "only --overlap-backward uses it (this run sets it false)";
  if (c.local_devices > 1) {
    return "with --local-devices " + std::to_string(c.local_devices) +
           " each local rank computes its whole gradient before the node pushes; it applies "
           "to one local device only";
  }
  return "";
}

// A shard's parts go out as placed chunks of one push stream, each once the
// backward pass reports it final: that needs chunks and a reporting pass.
std::string IgnoredUnlessPushedInParts(const WorkerConfig& c) {
  if (c.push_chunk_bytes == 0) {
    return "only a push sent as chunks uses it (--push-chunk-bytes 0 sends one unary Push)";
  }
  return IgnoredUnlessOverlappedCpuMlp(c);
}

struct ConditionalFlag {
  const char* name;
  std::string (*ignored_because)(const WorkerConfig&);
};

// In DefineWorkerFlags' order, so that the first refusal is the first such
// flag of --help.
constexpr ConditionalFlag kConditionalFlags[] = {
    {"bits", IgnoredUnlessBlockCodec},
    {"block-size", IgnoredUnlessBlocksOrLocalRanks},
    {"beta", IgnoredUnlessLoco},
    {"reset-period", IgnoredUnlessLoco},
    {"error-bits", IgnoredUnlessErrorState},
    {"stochastic-rounding", IgnoredUnlessBlockCodec},
    {"hidden", IgnoredUnlessMlp},
    {"corpus-dir", IgnoredUnlessCharLm},
    {"lm-layers", IgnoredUnlessCharLm},
    {"lm-channels", IgnoredUnlessCharLm},
    {"lm-heads", IgnoredUnlessCharLm},
    {"lm-context", IgnoredUnlessCharLm},
    {"eval-windows", IgnoredUnlessCharLm},
    {"data-dir", IgnoredUnlessMlp},
    {"cpu-products", IgnoredUnlessCpuMlp},
    {"push-parts", IgnoredUnlessPushedInParts},
    {"ready-granularity", IgnoredUnlessOverlappedCpuMlp},
};

// --join-at-step against --wait-for-workers and, when --steps gives it, the
// end of training. With --epochs the end depends on the data set's size
// (a Fashion-MNIST file's header says how many images it holds; the char
// LM's corpus is any text), which only loading it tells: Train checks then.
Status CheckJoinAtStep(const WorkerConfig& c, const FlagSet& flags) {
  if (c.join_at_step == 0) return Status::Ok();
  const std::string join = flags.NamedWithValue("join-at-step", std::to_string(c.join_at_step));
  if (c.wait_for_workers > 0) {
    return InvalidArgument(
        join + " and " +
        flags.NamedWithValue("wait-for-workers", std::to_string(c.wait_for_workers)) +
        " contradict each other: --wait-for-workers is for the workers that "
        "start at step 0; a worker that joins later must not set it");
  }
  if (c.steps > 0 && c.join_at_step >= c.steps) {
    return InvalidArgument("invalid value '" + std::to_string(c.join_at_step) + "' for " +
                           flags.Named("join-at-step") + ": training ends at step " +
                           std::to_string(c.steps) + ", set by " + flags.Named("steps") +
                           "; expected a step below it");
  }
  return Status::Ok();
}

}  // namespace

void DefineWorkerFlags(FlagSet& f, WorkerConfig* c) {
  const WorkerOptions d;
  DefineClusterFlags(f, c);
  DefineCodecFlags(f, d, c);
  DefineModelFlags(f, c);
  DefineScheduleFlags(f, c);
  DefineDeviceFlags(f, c);
  DefineRunFlags(f, c);
  DefineRpcFlags(f, d, c);
  DefineMetricsFlags(f, c);
  DefineStepFlags(f, c);
  AddTransportSecurityFlags(f, TransportRole::kClient, &c->security);
  f.AddBool("check-flags", "", false,
            "check the flags and the TLS and token files they name, then exit: 0 when the worker "
            "would start, 2 with the reason otherwise; loads no data and dials nothing",
            &c->check_flags);
  f.AddBool("print-config-markdown", "", false,
            "print the flag table in Markdown and exit", &c->print_markdown);
}

Status ParseHiddenLayers(const std::string& s, std::vector<size_t>* out, const std::string& named) {
  const std::string refused = "invalid value '" + s + "' for " + named +
                              ": expected positive layer sizes separated by commas, e.g. "
                              "1024,1024";
  // getline yields no item after a final comma: "1024," would read as one
  // layer; it is more likely a size left out than meant.
  if (!s.empty() && s.back() == ',') return InvalidArgument(refused + " (no trailing comma)");
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    // Digits only: strtoll alone would also take "+64" and " 64".
    const bool digits = !item.empty() && item.find_first_not_of("0123456789") == std::string::npos;
    const long v = digits ? std::strtol(item.c_str(), nullptr, 10) : 0;
    if (v < 1 || v > (1 << 20)) return InvalidArgument(refused);
    out->push_back(static_cast<size_t>(v));
  }
  return Status::Ok();
}

uint64_t MlpParameterCount(const std::vector<size_t>& hidden) {
  // Fashion-MNIST's 28x28 images in, its classes out (as MakeMlpTask builds it).
  std::vector<uint64_t> sizes{uint64_t{28} * 28};
  sizes.insert(sizes.end(), hidden.begin(), hidden.end());
  sizes.push_back(FashionMnist::kClasses);
  uint64_t total = 0;
  for (size_t k = 0; k + 1 < sizes.size(); ++k) {
    uint64_t layer = 0;  // weights and biases of layer k
    if (__builtin_mul_overflow(sizes[k] + 1, sizes[k + 1], &layer) ||
        __builtin_add_overflow(total, layer, &total)) {
      return UINT64_MAX;
    }
  }
  return total;
}

Status CheckMlpSize(const std::string& flag_value, const std::vector<size_t>& hidden,
                    uint64_t memory_bytes, const std::string& named) {
  if (memory_bytes == 0) return Status::Ok();
  const uint64_t count = MlpParameterCount(hidden);
  const uint64_t limit = memory_bytes / kWorkerBytesPerParameter;
  if (count <= limit) return Status::Ok();
  std::ostringstream m;
  m.precision(3);
  m << "invalid value '" << flag_value << "' for " << named << ": the MLP has "
    << (count == UINT64_MAX ? "more than 2^64" : std::to_string(count))
    << " parameters (784 inputs, 10 classes), and this machine's "
    << static_cast<double>(memory_bytes) / (uint64_t{1} << 30) << " GiB of memory hold at most "
    << limit << " (the worker keeps " << kWorkerBytesPerParameter
    << " bytes per parameter: its value, its initial value and its gradient as 32-bit floats); "
       "expected smaller layers";
  return InvalidArgument(m.str());
}

uint64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

Status CheckWorkerConfig(const WorkerConfig& c, const FlagSet& flags) {
  const auto named = [&flags](const char* name) { return flags.Named(name); };
  if (c.error_bits != 8 && c.error_bits != 32) {
    return InvalidArgument("invalid value '" + std::to_string(c.error_bits) + "' for " +
                           named("error-bits") + ": expected 8 or 32");
  }
  if (c.bits != 2 && c.bits != 4 && c.bits != 8) {
    return InvalidArgument("invalid value '" + std::to_string(c.bits) + "' for " + named("bits") +
                           ": expected 2, 4 or 8");
  }
  if (c.lm_channels % c.lm_heads != 0) {
    return InvalidArgument("invalid value '" + std::to_string(c.lm_channels) + "' for " +
                           named("lm-channels") + ": expected a multiple of " +
                           flags.NamedWithValue("lm-heads", std::to_string(c.lm_heads)));
  }
  LOCO_RETURN_IF_ERROR(CheckJoinAtStep(c, flags));
  if (c.local_group == "nccl" && (c.device != "cuda" || !HaveNcclLocalGroup())) {
    return InvalidArgument(flags.NamedWithValue("local-group", "nccl") + " " +
                           (c.device != "cuda"
                                ? "needs --device cuda (NCCL reduces on CUDA devices)"
                                : "needs a build with NCCL (this one has none)") +
                           "; use --local-group cpu or auto");
  }
  if (c.device == "cuda" && c.model != "mlp") {
    return InvalidArgument(flags.NamedWithValue("device", "cuda") +
                           " runs --model mlp only (the char LM has no CUDA version); use "
                           "--device cpu with --model " +
                           c.model);
  }
  if (c.device == "cuda" && cuda::DeviceCount() < c.local_devices) {
    return InvalidArgument(flags.NamedWithValue("device", "cuda") + " with " +
                           flags.NamedWithValue("local-devices", std::to_string(c.local_devices)) +
                           " needs that many CUDA devices; " +
                           (cuda::BuiltWithCuda() ? "found " + std::to_string(cuda::DeviceCount())
                                                  : std::string("this build has no CUDA support")) +
                           "; use --device cpu or fewer --local-devices");
  }
  if (c.block_size % 32 != 0) {
    return InvalidArgument("invalid value '" + std::to_string(c.block_size) + "' for " +
                           named("block-size") + ": expected a multiple of 32 in [32, 4096]");
  }
  if (c.push_chunk_bytes != 0 && c.push_chunk_bytes < 4096) {
    return InvalidArgument("invalid value '" + std::to_string(c.push_chunk_bytes) + "' for " +
                           named("push-chunk-bytes") +
                           ": expected 0 (one unary Push) or a size in [4096, " +
                           std::to_string(int64_t{64} << 20) + "]");
  }
  return Status::Ok();
}

Status CheckFlagsApply(const WorkerConfig& c, const FlagSet& flags,
                       std::vector<std::string>* notes) {
  std::vector<FlagCondition> conditions;
  for (const ConditionalFlag& flag : kConditionalFlags) {
    conditions.push_back({flag.name, [&c, &flag] { return flag.ignored_because(c); }});
  }
  return CheckFlagsTakeEffect(flags, conditions, notes);
}

}  // namespace loco

#include "plan/plan_command.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <utility>
#include <vector>

#include "common/flags.h"
#include "common/format_double.h"
#include "common/program_dir.h"
#include "plan/calibration.h"
#include "plan/calibration_fit.h"
#include "plan/cluster_spec.h"
#include "plan/cost_model.h"
#include "plan/measured_runs.h"
#include "plan/plan_report.h"
#include "plan/recommendation.h"

namespace loco::plan {
namespace {

constexpr int kFlagError = 2, kDataError = 1;

// Where the build (plan/CMakeLists.txt) and the image (Dockerfile) put the
// calibration of bench/plan/, relative to the folder of loco-plan itself: so
// the planner finds it from any working directory.
constexpr const char* kShippedCalibration = "<bin>/../share/loco-ps/plan/calibration.txt";

std::string ShippedCalibrationPath() {
  return (std::filesystem::path(ProgramDir()).parent_path() / "share/loco-ps/plan/calibration.txt")
      .string();
}

// Every flag's value as parsed, before it becomes a ClusterSpec.
struct PlanFlags {
  std::string mode, calibration, measured, write_calibration, format;
  double params = 0, link_gbps = 0, server_link_gbps = 0, intra_node_gbps = 0, compute_ms = 0,
         tolerance = 0;
  int64_t workers = 0, gpus_per_node = 0, shards = 0, max_shards = 0, batch_per_gpu = 0,
          shard_align = 0, worker_cores = 0, server_cores = 0, apply_threads = 0,
          shared_cores = 0;
  std::string codec, pull_codec;
  int64_t bits = 0, block = 0, pull_bits = 0, pull_block = 0, full_sync_every = 0;
};

void DefineFileFlags(FlagSet& flags, PlanFlags* v) {
  flags.AddEnum("mode", "LOCO_PLAN_MODE", "predict", {"predict", "calibrate"},
                "predict: a cluster's step from a calibration; calibrate: fit a calibration "
                "to measured runs",
                &v->mode);
  flags.AddString("calibration", "LOCO_PLAN_CALIBRATION", "",
                  "calibration file the prediction uses (written by --mode=calibrate; empty = "
                  "the one shipped beside the program, " +
                      std::string(kShippedCalibration) + ")",
                  &v->calibration);
  flags.AddString("measured", "LOCO_PLAN_MEASURED", "bench/plan/measured.csv",
                  "--mode=calibrate: CSV of measured bench/e2e runs to fit",
                  &v->measured);
  flags.AddString("write-calibration", "LOCO_PLAN_WRITE_CALIBRATION", "",
                  "--mode=calibrate: file the fitted calibration is written to (required)",
                  &v->write_calibration);
  flags.AddEnum("format", "LOCO_PLAN_FORMAT", "text", {"text", "json"},
                "output: text for people, json (one object) for scripts", &v->format);
}

void DefineClusterFlags(FlagSet& flags, PlanFlags* v) {
  flags.AddDouble("params", "LOCO_PLAN_PARAMS", 1e9, 1e6, 1e11,
                  "model size, parameters (1e6 to 1e11)", &v->params);
  flags.AddInt("workers", "LOCO_PLAN_WORKERS", 16, 1, 1024,
               "worker nodes; each pushes one payload per shard per step", &v->workers);
  flags.AddInt("gpus-per-node", "LOCO_PLAN_GPUS_PER_NODE", 1, 1, 64,
               "devices per worker node, reduced inside the node before the push",
               &v->gpus_per_node);
  flags.AddInt("shards", "LOCO_PLAN_SHARDS", 0, 0, 4096,
               "parameter servers (one shard each; 0 = the recommended count)", &v->shards);
  flags.AddInt("max-shards", "LOCO_PLAN_MAX_SHARDS", 256, 1, 4096,
               "largest shard count the recommendation considers", &v->max_shards);
  flags.AddDouble("tolerance", "LOCO_PLAN_TOLERANCE", 0.05, 0, 1,
                  "recommend the fewest shards whose step is within this fraction of the "
                  "fastest",
                  &v->tolerance);
  flags.AddInt("shard-align", "LOCO_PLAN_SHARD_ALIGN", 4096, 32, int64_t{1} << 30,
               "shard boundaries' multiple (loco-coordinator --shard-align)", &v->shard_align);
  flags.AddInt("batch-per-gpu", "LOCO_PLAN_BATCH_PER_GPU", 32, 1, 1 << 20,
               "samples per device per step", &v->batch_per_gpu);
  flags.AddDouble("compute-ms", "LOCO_PLAN_COMPUTE_MS", 0, 0, 1e7,
                  "one device's forward and backward, ms (0 = the calibration's CPU estimate)",
                  &v->compute_ms);
  flags.AddDouble("link-gbps", "LOCO_PLAN_LINK_GBPS", 10, 0.001, 100000,
                  "each worker node's network link, Gbit/s per direction", &v->link_gbps);
  flags.AddDouble("server-link-gbps", "LOCO_PLAN_SERVER_LINK_GBPS", 0, 0, 100000,
                  "each server's network link, Gbit/s per direction (0 = --link-gbps)",
                  &v->server_link_gbps);
  flags.AddDouble("intra-node-gbps", "LOCO_PLAN_INTRA_NODE_GBPS", 1000, 1, 1e7,
                  "the devices' reduce-scatter bandwidth inside a node, Gbit/s",
                  &v->intra_node_gbps);
  flags.AddInt("worker-cores", "LOCO_PLAN_WORKER_CORES", 8, 1, 1024,
               "CPU cores of a worker node for the network stack", &v->worker_cores);
  flags.AddInt("server-cores", "LOCO_PLAN_SERVER_CORES", 4, 1, 1024,
               "CPU cores of a server", &v->server_cores);
  flags.AddInt("apply-threads", "LOCO_PLAN_APPLY_THREADS", 0, 0, kMaxApplyThreads,
               "threads of a server's update (loco-server --apply-threads; 0 = its default, "
               "the server's cores, at most 4)",
               &v->apply_threads);
  flags.AddInt("shared-cores", "LOCO_PLAN_SHARED_CORES", 0, 0, 1024,
               "0 = each process on its own machine; N = every process on one host of N "
               "cores (as bench/e2e runs)",
               &v->shared_cores);
}

void DefineCodecFlags(FlagSet& flags, PlanFlags* v) {
  flags.AddEnum("codec", "LOCO_PLAN_CODEC", "loco", {"loco", "fp32", "bf16"},
                "gradient payloads: LoCo block-quantised codes, fp32 or bf16", &v->codec);
  flags.AddInt("bits", "LOCO_PLAN_BITS", 4, 2, 8, "bits per LoCo code (2, 4 or 8)", &v->bits);
  flags.AddInt("block", "LOCO_PLAN_BLOCK", 256, 32, 4096,
               "elements per LoCo scale (multiple of 32)", &v->block);
  flags.AddEnum("pull-codec", "LOCO_PLAN_PULL_CODEC", "delta", {"delta", "bf16", "fp32"},
                "the return path (loco-server --pull-codec)", &v->pull_codec);
  flags.AddInt("pull-bits", "LOCO_PLAN_PULL_BITS", 8, 2, 8,
               "bits per delta code (loco-server --pull-bits: 2, 4 or 8)", &v->pull_bits);
  flags.AddInt("pull-block", "LOCO_PLAN_PULL_BLOCK", 128, 32, 4096,
               "elements per delta scale (loco-server --pull-block-size)", &v->pull_block);
  flags.AddInt("full-sync-every", "LOCO_PLAN_FULL_SYNC_EVERY", 50, 0, int64_t{1} << 40,
               "a full fp32 copy every this many steps with delta (loco-server "
               "--full-sync-every; 0 = never)",
               &v->full_sync_every);
}

WireEncoding Encoding(const std::string& codec, int64_t bits, int64_t block) {
  if (codec == "fp32") return {WireCodec::kFp32, 32, 0};
  if (codec == "bf16") return {WireCodec::kBf16, 16, 0};
  return {WireCodec::kBlockQuant, static_cast<int>(bits), static_cast<int>(block)};
}

StatusOr<ClusterSpec> SpecFromFlags(const PlanFlags& v) {
  if (v.params != std::floor(v.params)) {
    return InvalidArgument("--params " + FormatDouble(v.params) + " is not a whole number");
  }
  ClusterSpec s;
  s.params = static_cast<uint64_t>(v.params);
  s.workers = static_cast<uint32_t>(v.workers);
  s.gpus_per_node = static_cast<uint32_t>(v.gpus_per_node);
  s.shards = v.shards > 0 ? static_cast<uint32_t>(v.shards) : 1;
  s.shard_align = static_cast<uint32_t>(v.shard_align);
  s.batch_per_gpu = static_cast<uint32_t>(v.batch_per_gpu);
  s.compute_s = v.compute_ms / 1000;
  s.worker_link_gbps = v.link_gbps;
  s.server_link_gbps = v.server_link_gbps > 0 ? v.server_link_gbps : v.link_gbps;
  s.intra_node_gbps = v.intra_node_gbps;
  s.push = Encoding(v.codec, v.bits, v.block);
  s.pull = Encoding(v.pull_codec, v.pull_bits, v.pull_block);
  s.full_sync_every = static_cast<uint64_t>(v.full_sync_every);
  s.worker_cores = static_cast<uint32_t>(v.worker_cores);
  s.server_cores = static_cast<uint32_t>(v.server_cores);
  s.apply_threads = static_cast<uint32_t>(v.apply_threads);
  s.shared_cores = static_cast<uint32_t>(v.shared_cores);
  // Checked whatever the codec, so that a wrong value never passes unseen.
  for (const auto& [flag, bits] :
       {std::pair{"--bits", v.bits}, std::pair{"--pull-bits", v.pull_bits}}) {
    if (bits != 2 && bits != 4 && bits != 8) {
      return InvalidArgument(std::string(flag) + " " + std::to_string(bits) +
                             " is not 2, 4 or 8");
    }
  }
  for (const auto& [flag, block] :
       {std::pair{"--block", v.block}, std::pair{"--pull-block", v.pull_block}}) {
    if (block % 32 != 0) {
      return InvalidArgument(std::string(flag) + " " + std::to_string(block) +
                             " is not a multiple of 32");
    }
  }
  if (v.shard_align % 32 != 0) {
    return InvalidArgument("--shard-align " + std::to_string(v.shard_align) +
                           " is not a multiple of 32");
  }
  LOCO_RETURN_IF_ERROR(ValidateClusterSpec(s));
  return s;
}

// Whether the paths `a` and `b` name one file: when both exist, whether
// they are the same file (std::filesystem::equivalent: through links,
// "./" and "../"), else whether they are the same path once absolute and
// normal.
bool SameFile(const std::string& a, const std::string& b) {
  std::error_code error;
  const bool same = std::filesystem::equivalent(a, b, error);
  if (!error) return same;
  const std::filesystem::path pa = std::filesystem::weakly_canonical(a, error);
  if (error) return false;
  const std::filesystem::path pb = std::filesystem::weakly_canonical(b, error);
  return !error && pa == pb;
}

int Calibrate(const PlanFlags& v, std::ostream& out, std::ostream& err) {
  if (v.write_calibration.empty()) {
    err << "loco-plan: --mode=calibrate needs --write-calibration FILE (where the fitted "
           "constants go)\n";
    return kFlagError;
  }
  if (SameFile(v.measured, v.write_calibration)) {
    err << "loco-plan: --write-calibration " << v.write_calibration
        << " is the file --measured reads (" << v.measured
        << "); writing the calibration there would replace the measured runs; expected "
           "another file\n";
    return kFlagError;
  }
  StatusOr<std::vector<MeasuredRun>> runs = ReadMeasuredRuns(v.measured);
  if (!runs.ok()) {
    err << "loco-plan: " << runs.status().message() << "\n";
    return kDataError;
  }
  StatusOr<Calibration> c = FitCalibration(*runs, v.measured);
  Status written = c.ok() ? WriteCalibrationFile(v.write_calibration, *c) : c.status();
  if (!written.ok()) {
    err << "loco-plan: " << written.message() << "\n";
    return kDataError;
  }
  out << "loco-plan: fitted " << c->runs << " runs of " << v.measured << " (rms step error "
      << FormatDouble(100 * c->rms_relative_error) << "%); wrote " << v.write_calibration
      << "\n";
  return 0;
}

int PredictAndPrint(const PlanFlags& v, std::ostream& out, std::ostream& err) {
  StatusOr<ClusterSpec> spec = SpecFromFlags(v);
  if (!spec.ok()) {
    err << "loco-plan: " << spec.status().message() << "\n";
    return kFlagError;
  }
  const bool shipped = v.calibration.empty();
  const std::string calibration_path = shipped ? ShippedCalibrationPath() : v.calibration;
  StatusOr<Calibration> calibration = ReadCalibrationFile(calibration_path);
  if (!calibration.ok()) {
    err << "loco-plan: " << calibration.status().message()
        << (shipped ? " (the calibration shipped beside loco-plan; --calibration or "
                      "$LOCO_PLAN_CALIBRATION names another; --mode=calibrate writes one)\n"
                    : " (--calibration or $LOCO_PLAN_CALIBRATION names it; --mode=calibrate "
                      "writes one)\n");
    return kDataError;
  }
  StatusOr<ShardRecommendation> rec = RecommendShards(
      *spec, *calibration, static_cast<uint32_t>(v.max_shards), v.tolerance);
  if (!rec.ok()) {
    err << "loco-plan: " << rec.status().message() << "\n";
    return kFlagError;
  }
  PlanReport report{calibration_path, *calibration, *spec, rec->recommended, *rec, v.tolerance};
  if (v.shards > 0) {
    StatusOr<Prediction> p = Predict(*spec, *calibration);
    if (!p.ok()) {
      err << "loco-plan: " << p.status().message() << "\n";
      return kFlagError;
    }
    report.prediction = *p;
  } else {
    report.spec.shards = rec->shards;
  }
  out << (v.format == "json" ? FormatPlanJson(report) : FormatPlanText(report));
  return 0;
}

// Why the settings ignore a flag, for CheckFlagsTakeEffect: calibrate fits
// the measured runs and describes no cluster; predict reads no runs; only
// the block codec has codes and blocks; only the delta return path
// quantizes and sends full copies between deltas. Empty when it applies.
std::string IgnoredInCalibrate(const PlanFlags& v) {
  return v.mode == "calibrate"
             ? "--mode=calibrate fits the runs of --measured and predicts no cluster"
             : "";
}
std::string IgnoredInPredict(const PlanFlags& v) {
  return v.mode == "predict" ? "--mode=predict reads the constants of --calibration, no runs" : "";
}
std::string IgnoredUnlessBlockCodec(const PlanFlags& v) {
  if (std::string why = IgnoredInCalibrate(v); !why.empty()) return why;
  return v.codec == "loco"
             ? ""
             : "only --codec loco has codes and blocks (this plan is --codec " + v.codec + ")";
}
std::string IgnoredUnlessDelta(const PlanFlags& v) {
  if (std::string why = IgnoredInCalibrate(v); !why.empty()) return why;
  return v.pull_codec == "delta"
             ? ""
             : "only --pull-codec delta quantizes and sends full copies (this plan is "
               "--pull-codec " +
                   v.pull_codec + ")";
}

// A flag typed where the other settings ignore it is refused; one from the
// environment is a note on `err`.
Status CheckFlagsApply(const FlagSet& flags, const PlanFlags& v, std::ostream& err) {
  const auto calibrate = [&v] { return IgnoredInCalibrate(v); };
  const auto predict = [&v] { return IgnoredInPredict(v); };
  const auto block = [&v] { return IgnoredUnlessBlockCodec(v); };
  const auto delta = [&v] { return IgnoredUnlessDelta(v); };
  std::vector<FlagCondition> conditions = {{"measured", predict},
                                           {"write-calibration", predict},
                                           {"calibration", calibrate},
                                           {"format", calibrate}};
  for (const char* name :
       {"params", "workers", "gpus-per-node", "shards", "max-shards", "tolerance", "shard-align",
        "batch-per-gpu", "compute-ms", "link-gbps", "server-link-gbps", "intra-node-gbps",
        "worker-cores", "server-cores", "apply-threads", "shared-cores", "codec", "pull-codec"}) {
    conditions.push_back({name, calibrate});
  }
  for (const char* name : {"bits", "block"}) conditions.push_back({name, block});
  for (const char* name : {"pull-bits", "pull-block", "full-sync-every"}) {
    conditions.push_back({name, delta});
  }
  std::vector<std::string> notes;
  LOCO_RETURN_IF_ERROR(CheckFlagsTakeEffect(flags, conditions, &notes));
  for (const std::string& note : notes) err << "loco-plan: " << note << "\n";
  return Status::Ok();
}

}  // namespace

int RunPlanCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  PlanFlags v;
  FlagSet flags("loco-plan");
  DefineFileFlags(flags, &v);
  DefineClusterFlags(flags, &v);
  DefineCodecFlags(flags, &v);
  for (const std::string& a : args) {
    if (a == "--print-config-markdown") {
      out << flags.MarkdownRows();
      return 0;
    }
  }
  bool help = false;
  Status parsed = flags.Parse(args, [](const char* name) { return std::getenv(name); }, &help);
  if (!parsed.ok()) {
    err << parsed.message() << "\n";
    return kFlagError;
  }
  if (help) {
    out << flags.Help();
    return 0;
  }
  if (Status s = CheckFlagsApply(flags, v, err); !s.ok()) {
    err << "loco-plan: " << s.message() << "\n";
    return kFlagError;
  }
  return v.mode == "calibrate" ? Calibrate(v, out, err) : PredictAndPrint(v, out, err);
}

}  // namespace loco::plan

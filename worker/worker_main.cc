// loco-worker: trains a built-in model (--model: the MLP on Fashion-MNIST, or
// the character-level transformer on the fortunes corpus) as one data-parallel
// worker of a LoCo-PS cluster. For charlm, "test_accuracy"/"test_loss" are
// next-byte accuracy and cross-entropy on the validation windows.
//
// Progress goes to stdout as JSON lines (parsed by the launcher; the keys are
// a contract), logs to stderr:
//   {"event":"step","worker":id,"rank":r,"world":w,"step":t,"loss":x,
//    "samples_per_s":y,"push_wire_bytes":…,"push_fp32_bytes":…,
//    "pull_wire_bytes":…,"pull_fp32_bytes":…,"resynced":b,"nonfinite":n}
//   {"event":"eval","worker":id,"step":t,"epoch":e,"test_accuracy":a,"test_loss":l}
//   {"event":"done","worker":id,"steps":n,["test_accuracy":a,]"params_crc":c,"wall_s":s,
//    four byte counts}
//   {"event":"waiting","join_at_step":n}  with --join-at-step: ready, waiting for step n
//   {"event":"joined","worker":id,"step":t,"rejoin":b,"params_crc":c}  after (re)joining
//     (with --join-at-step N, the first one comes once the cluster reached N;
//     t, its first step, may be a little past N: the cluster does not wait)
//   {"event":"expired","worker":id,"step":t}  removed by the coordinator; it rejoins
//   {"event":"left","worker":id,"step":t,"signal":n}  SIGTERM/SIGINT: left at once, exit 0
// "params_crc" is the CRC-32 of the fp32 parameters (the copy the worker holds
// then; in step events with --report-params-crc, the copy the gradient was
// computed at), so that copies can be compared across workers and servers.
// "step" is the global step the gradient was computed at; "samples_per_s" is
// this worker's own samples per second over the report window; byte counts
// are cumulative (worker/worker_stats.h); "steps" in "done" is the global
// step the worker reached.
//
// Exit status: 0 when training reached the target step (or the worker left
// on SIGTERM/SIGINT), 2 for invalid flags,
// 1 for any other error (message on stderr).
#include <cblas.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/registry.h>

#include "common/flags.h"
#include "common/log.h"
#include "metrics/metrics_endpoint.h"
#include "worker/batch_sampler.h"
#include "worker/fashion_mnist.h"
#include "worker/mlp.h"
#include "common/termination_watch.h"
#include "worker/text_corpus.h"
#include "worker/trace_writer.h"
#include "worker/training_metrics.h"
#include "worker/training_task.h"
#include "worker/worker.h"

namespace {

using loco::Status;

struct Config {
  std::string coordinator, name, codec, data_dir, hidden, eval, metrics_host;
  std::string model = "mlp", corpus_dir, trace_dir;
  int64_t lm_layers = 2, lm_channels = 128, lm_heads = 4, lm_context = 64;
  int64_t eval_every = 0, eval_windows = 256, wait_for_workers = 0;
  int64_t join_at_step = 0, join_wait_timeout_ms = 0;
  int64_t bits = 4, block_size = 128, reset_period = 0, error_bits = 8, seed = 0;
  int64_t global_batch = 256, epochs = 2, steps = 0, blas_threads = 1, report_every = 1;
  int64_t rpc_timeout_ms = 0, pull_wait_ms = 0, step_timeout_ms = 0, join_timeout_ms = 0;
  int64_t max_retries = 0, metrics_port = 0;
  double beta = 0.5;
  bool stochastic_rounding = false, print_markdown = false, report_params_crc = false;
};

void DefineFlags(loco::FlagSet& f, Config* c) {
  const loco::WorkerOptions d;
  f.AddString("coordinator", "LOCO_COORDINATOR", "127.0.0.1:7000",
              "host:port of the coordinator", &c->coordinator);
  f.AddString("name", "LOCO_NAME", "", "worker name for logs (default: hostname-pid)", &c->name);
  f.AddEnum("codec", "LOCO_CODEC", d.codec, {"fp32", "bf16", "naive", "ef", "loco"},
            "gradient push encoding", &c->codec);
  f.AddInt("bits", "LOCO_BITS", d.bits, 2, 8, "code width of the block codecs (2, 4 or 8)",
           &c->bits);
  f.AddInt("block-size", "LOCO_BLOCK_SIZE", d.block_size, 32, 4096,
           "elements per quantization block (multiple of 32)", &c->block_size);
  f.AddDouble("beta", "LOCO_BETA", d.beta, 0.0, 0.999999,
              "LoCo weight on the old error (codec loco)", &c->beta);
  f.AddInt("reset-period", "LOCO_RESET_PERIOD", d.reset_period, 0, 1 << 30,
           "LoCo error reset period in steps, 0 = never (codec loco)", &c->reset_period);
  f.AddInt("error-bits", "LOCO_ERROR_BITS", d.error_bits, 8, 32,
           "error-state storage: 8 (int8 + block scales) or 32 (fp32)", &c->error_bits);
  f.AddBool("stochastic-rounding", "LOCO_STOCHASTIC_ROUNDING", d.stochastic_rounding,
            "stochastic instead of nearest rounding in the block codecs",
            &c->stochastic_rounding);
  f.AddInt("seed", "LOCO_SEED", 0, 0, INT64_MAX,
           "model init and data order; every worker must use the same seed", &c->seed);
  f.AddString("hidden", "LOCO_HIDDEN", "1024,1024", "hidden layer sizes, comma separated",
              &c->hidden);
  f.AddEnum("model", "LOCO_MODEL", "mlp", {"mlp", "charlm"},
            "built-in model: mlp (Fashion-MNIST) or charlm (character transformer on a text "
            "corpus)",
            &c->model);
  f.AddString("corpus-dir", "LOCO_CORPUS_DIR", loco::TextCorpus::kDefaultDir,
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
  f.AddInt("global-batch", "LOCO_GLOBAL_BATCH", 256, 1, 1 << 20,
           "samples per step across all workers", &c->global_batch);
  f.AddInt("epochs", "LOCO_EPOCHS", 2, 1, 100000, "data epochs to train (when --steps is 0)",
           &c->epochs);
  f.AddInt("steps", "LOCO_STEPS", 0, 0, INT64_MAX / 2,
           "global steps to train; 0 = epochs * ceil(60000 / global-batch)", &c->steps);
  f.AddString("data-dir", "LOCO_DATA_DIR", loco::FashionMnist::kDefaultDir,
              "folder with the Fashion-MNIST *-ubyte.gz files", &c->data_dir);
  f.AddInt("blas-threads", "LOCO_BLAS_THREADS", 1, 1, 256, "OpenBLAS threads", &c->blas_threads);
  f.AddEnum("eval", "LOCO_EVAL", "rank0", {"rank0", "all", "none"},
            "who computes test accuracy at epoch ends and at the end", &c->eval);
  f.AddInt("report-every", "LOCO_REPORT_EVERY", 1, 1, 1 << 30,
           "print a step event every N steps", &c->report_every);
  f.AddInt("rpc-timeout-ms", "LOCO_RPC_TIMEOUT_MS", d.rpc_timeout_ms, 1, 3600000,
           "deadline of one RPC", &c->rpc_timeout_ms);
  f.AddInt("pull-wait-ms", "LOCO_PULL_WAIT_MS", d.pull_wait_ms, 0, 3600000,
           "how long one pull waits on the server for the next version", &c->pull_wait_ms);
  f.AddInt("step-timeout-ms", "LOCO_STEP_TIMEOUT_MS", d.step_timeout_ms, 1, 86400000,
           "upper bound on one step's wait for the shards", &c->step_timeout_ms);
  f.AddInt("join-timeout-ms", "LOCO_JOIN_TIMEOUT_MS", d.join_timeout_ms, 1, 86400000,
           "upper bound on the wait for the cluster to be ready", &c->join_timeout_ms);
  f.AddInt("max-retries", "LOCO_MAX_RETRIES", d.max_retries, 0, 1000,
           "retries of an RPC refused with UNAVAILABLE", &c->max_retries);
  f.AddString("metrics-host", "LOCO_METRICS_HOST", "127.0.0.1",
              "address the Prometheus /metrics endpoint listens on", &c->metrics_host);
  f.AddInt("metrics-port", "LOCO_METRICS_PORT", 0, 0, 65535,
           "port of the Prometheus /metrics endpoint (0 = off)", &c->metrics_port);
  f.AddBool("report-params-crc", "LOCO_REPORT_PARAMS_CRC", false,
            "add the CRC-32 of the parameters each gradient was computed at to every step "
            "event (to check that every copy agrees)",
            &c->report_params_crc);
  f.AddBool("print-config-markdown", "", false,
            "print the flag table in Markdown and exit", &c->print_markdown);
}

Status ParseHidden(const std::string& s, std::vector<size_t>* out) {
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > (1 << 20)) {
      return loco::InvalidArgument("invalid value '" + s + "' for --hidden: expected positive "
                                   "layer sizes separated by commas, e.g. 1024,1024");
    }
    out->push_back(static_cast<size_t>(v));
  }
  return Status::Ok();
}

std::string Num(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.6g", x);
  return buf;
}

std::string Bytes(const loco::TrafficStats& t) {
  return "\"push_wire_bytes\":" + std::to_string(t.push_wire_bytes) +
         ",\"push_fp32_bytes\":" + std::to_string(t.push_fp32_bytes) +
         ",\"pull_wire_bytes\":" + std::to_string(t.pull_wire_bytes) +
         ",\"pull_fp32_bytes\":" + std::to_string(t.pull_fp32_bytes);
}

// One fwrite per event (stdio locks the stream per call), so that events
// from the signal thread never interleave with the training loop's.
void Emit(const std::string& json) {
  const std::string line = json + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

// CRC-32 (zlib) of the fp32 bytes: equal copies of the parameters, equal CRCs.
std::string ParamsCrc(const std::vector<float>& params) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(params.data());
  size_t n = params.size() * sizeof(float);
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return std::to_string(crc);
}

std::string JoinedEvent(const loco::Worker& w, const std::vector<float>& params, bool rejoin) {
  return "{\"event\":\"joined\",\"worker\":" + std::to_string(w.worker_id()) +
         ",\"step\":" + std::to_string(w.step()) + ",\"rejoin\":" +
         (rejoin ? "true" : "false") + ",\"params_crc\":" + ParamsCrc(params) + "}";
}

// Rejoins after an expiry at most this many times per process.
constexpr int kMaxRejoins = 16;

bool ShouldEval(const std::string& policy, uint32_t rank) {
  return policy == "all" || (policy == "rank0" && rank == 0);
}

int Fail(const std::string& what, const Status& s) {
  LOG_ERROR(what << ": " << s.ToString());
  return 1;
}

// The built-in model named by --model, with its data.
loco::StatusOr<std::unique_ptr<loco::TrainingTask>> MakeTask(const Config& c,
                                                             const std::vector<size_t>& hidden) {
  if (c.model == "mlp") return loco::MakeMlpTask(c.data_dir, hidden);
  loco::CharTransformerConfig lm;
  lm.layers = static_cast<size_t>(c.lm_layers);
  lm.channels = static_cast<size_t>(c.lm_channels);
  lm.heads = static_cast<size_t>(c.lm_heads);
  lm.context = static_cast<size_t>(c.lm_context);
  return loco::MakeCharLmTask(c.corpus_dir, lm, static_cast<size_t>(c.eval_windows));
}

int Train(const Config& c, const std::vector<size_t>& hidden) {
  const auto t0 = std::chrono::steady_clock::now();
  auto made = MakeTask(c, hidden);
  if (!made.ok()) return Fail("building the model and its data", made.status());
  loco::TrainingTask& task = **made;
  const std::vector<float> initial = task.InitialParameters(static_cast<uint64_t>(c.seed));
  std::optional<loco::TraceWriter> trace;
  if (!c.trace_dir.empty()) {
    auto opened = loco::TraceWriter::Open(c.trace_dir, c.name);
    if (!opened.ok()) return Fail("opening the trace", opened.status());
    trace.emplace(std::move(opened).value());
  }

  loco::WorkerOptions o;
  o.coordinator = c.coordinator;
  o.name = c.name;
  o.codec = c.codec;
  o.bits = static_cast<int>(c.bits);
  o.block_size = static_cast<int>(c.block_size);
  o.beta = static_cast<float>(c.beta);
  o.reset_period = c.reset_period;
  o.error_bits = static_cast<int>(c.error_bits);
  o.stochastic_rounding = c.stochastic_rounding;
  o.seed = static_cast<uint64_t>(c.seed);
  o.rpc_timeout_ms = static_cast<int>(c.rpc_timeout_ms);
  o.pull_wait_ms = static_cast<int>(c.pull_wait_ms);
  o.step_timeout_ms = static_cast<int>(c.step_timeout_ms);
  o.join_timeout_ms = static_cast<int>(c.join_timeout_ms);
  o.max_retries = static_cast<int>(c.max_retries);
  o.metrics_registry = std::make_shared<prometheus::Registry>();
  loco::TrainingMetrics training_metrics(*o.metrics_registry);
  std::unique_ptr<loco::MetricsEndpoint> metrics_endpoint;
  if (c.metrics_port > 0) {
    auto endpoint = loco::MetricsEndpoint::Start(c.metrics_host, static_cast<int>(c.metrics_port),
                                                 o.metrics_registry);
    if (!endpoint.ok()) return Fail("serving metrics", endpoint.status());
    metrics_endpoint = std::move(endpoint).value();
    LOG_INFO("metrics on " << metrics_endpoint->url());
  }
  auto sampler = loco::BatchSampler::Create(task.num_train_samples(), static_cast<size_t>(c.global_batch),
                                            static_cast<uint64_t>(c.seed));
  if (!sampler.ok()) return Fail("data sampler", sampler.status());
  const uint64_t per_epoch = sampler->steps_per_epoch();
  const uint64_t total = c.steps > 0 ? static_cast<uint64_t>(c.steps)
                                     : static_cast<uint64_t>(c.epochs) * per_epoch;
  if (c.join_at_step > 0 && static_cast<uint64_t>(c.join_at_step) >= total) {
    LOG_ERROR("invalid value '" << c.join_at_step << "' for --join-at-step: training ends at step "
                                << total << " (--steps or --epochs); expected a step below it");
    return 2;
  }
  auto connected = loco::Worker::Connect(o);
  if (!connected.ok()) {
    LOG_ERROR(connected.status().ToString());
    return 2;
  }
  loco::Worker& w = **connected;
  // SIGTERM/SIGINT: leave at once (the step in progress stops waiting for
  // this worker), report it and end the process; nothing else is saved.
  // Watched from before the join, so that a worker waiting for
  // --join-at-step ends at once too. `joining` is held while Join and
  // InitParameters run: a signal then waits for them, so that LeaveNow
  // knows the worker id the coordinator has just admitted.
  std::mutex joining;
  loco::TerminationWatch termination;
  termination.Start([&w, &joining](int sig) {
    std::lock_guard<std::mutex> lock(joining);
    const uint64_t at = w.step();
    if (Status s = w.LeaveNow(); !s.ok()) LOG_WARN("leaving on signal " << sig << ": " << s.ToString());
    Emit("{\"event\":\"left\",\"worker\":" + std::to_string(w.worker_id()) +
         ",\"step\":" + std::to_string(at) + ",\"signal\":" + std::to_string(sig) + "}");
    std::_Exit(0);
  });
  if (c.join_at_step > 0) {
    LOG_INFO("waiting for the cluster to reach step " << c.join_at_step << " before joining");
    Emit("{\"event\":\"waiting\",\"join_at_step\":" + std::to_string(c.join_at_step) + "}");
    auto seen = w.WaitForClusterStep(
        static_cast<uint64_t>(c.join_at_step),
        std::chrono::steady_clock::now() + std::chrono::milliseconds(c.join_wait_timeout_ms));
    if (!seen.ok()) return Fail("waiting for --join-at-step", seen.status());
    LOG_INFO("the cluster is at step " << *seen << "; joining");
  }
  std::vector<float> params;
  {
    std::lock_guard<std::mutex> lock(joining);
    if (Status s = w.Join(task.num_parameters()); !s.ok()) return Fail("joining", s);
    if (Status s = w.InitParameters(initial, &params); !s.ok()) return Fail("initialising", s);
  }
  Emit(JoinedEvent(w, params, /*rejoin=*/false));
  // The membership view arrives with heartbeats; polling it is bounded by
  // the join timeout. Reproducible runs (bench/convergence) need every worker
  // in the view before step 0 opens, or the first steps run with a smaller
  // world and another split of the batch.
  if (c.wait_for_workers > 0 && w.step() == 0) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(c.join_timeout_ms);
    while (w.world_size() < static_cast<uint32_t>(c.wait_for_workers) &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (w.world_size() < static_cast<uint32_t>(c.wait_for_workers)) {
      LOG_WARN("starting with " << w.world_size() << " worker(s); --wait-for-workers asked for "
                                << c.wait_for_workers);
    }
  }
  int rejoins = 0;
  std::string id = std::to_string(w.worker_id());
  LOG_INFO("training " << task.num_parameters() << " parameters for " << total
                       << " steps from step " << w.step());

  std::vector<float> grads;
  auto window_start = std::chrono::steady_clock::now();
  uint64_t window_samples = 0, since_report = 0;
  bool warned_empty = false;
  while (w.step() < total) {
    const uint64_t t = w.step();
    uint32_t world = std::max<uint32_t>(w.world_size(), 1);
    const uint32_t rank = std::min(w.rank(), world - 1);
    const std::vector<size_t> idx = sampler->Indices(t, world, rank);
    double loss = 0;
    if (idx.empty()) {
      // More workers than samples per step: this one contributes a zero gradient.
      if (!warned_empty) LOG_WARN("world " << world << " > global batch: no samples for rank "
                                           << rank);
      warned_empty = true;
      grads.assign(task.num_parameters(), 0.0f);
    } else {
      auto l = task.LossAndGradient(params, idx, &grads);
      if (!l.ok()) return Fail("computing the gradient", l.status());
      loss = *l;
    }
    const std::string crc = c.report_params_crc ? ",\"params_crc\":" + ParamsCrc(params) : "";
    auto r = w.Step(grads, &params);
    if (!r.ok() && w.expired() && rejoins < kMaxRejoins) {
      // Removed by the coordinator (stalled past the heartbeat timeout):
      // this step's gradient is dropped; join again and carry on.
      ++rejoins;
      LOG_WARN("step " << t << ": " << r.status().ToString() << "; rejoining");
      Emit("{\"event\":\"expired\",\"worker\":" + id + ",\"step\":" + std::to_string(t) + "}");
      if (Status s = w.Rejoin(initial, &params); !s.ok()) return Fail("rejoining", s);
      id = std::to_string(w.worker_id());
      Emit(JoinedEvent(w, params, /*rejoin=*/true));
      continue;
    }
    if (!r.ok()) return Fail("step " + std::to_string(t), r.status());
    window_samples += idx.size();
    training_metrics.OnStep(loss, idx.size());
    if (trace && !idx.empty()) {
      if (Status s = trace->Step(t, loss); !s.ok()) return Fail("writing the trace", s);
    }
    if (++since_report >= static_cast<uint64_t>(c.report_every) || r->resynced) {
      const auto now = std::chrono::steady_clock::now();
      const double secs = std::chrono::duration<double>(now - window_start).count();
      const loco::TrafficStats tr = w.traffic();
      training_metrics.OnThroughput(secs > 0 ? static_cast<double>(window_samples) / secs : 0.0);
      Emit("{\"event\":\"step\",\"worker\":" + id + ",\"rank\":" + std::to_string(rank) +
           ",\"world\":" + std::to_string(world) + ",\"step\":" + std::to_string(t) +
           ",\"loss\":" + Num(loss) + ",\"samples_per_s\":" +
           Num(secs > 0 ? static_cast<double>(window_samples) / secs : 0.0) + "," + Bytes(tr) +
           ",\"resynced\":" + (r->resynced ? "true" : "false") + crc +
           ",\"nonfinite\":" + std::to_string(r->nonfinite) + "}");
      window_start = now;
      window_samples = 0;
      since_report = 0;
    }
    const uint64_t now_step = w.step();
    const uint64_t eval_period =
        c.eval_every > 0 ? static_cast<uint64_t>(c.eval_every) : per_epoch;
    if (now_step / eval_period > t / eval_period && now_step < total &&
        ShouldEval(c.eval, w.rank())) {
      auto e = task.Evaluate(params);
      if (!e.ok()) return Fail("evaluating", e.status());
      if (trace) {
        if (Status s = trace->Eval(now_step, now_step / per_epoch, e->accuracy, e->loss); !s.ok()) {
          return Fail("writing the trace", s);
        }
      }
      Emit("{\"event\":\"eval\",\"worker\":" + id + ",\"step\":" + std::to_string(now_step) +
           ",\"epoch\":" + std::to_string(now_step / per_epoch) +
           ",\"test_accuracy\":" + Num(e->accuracy) + ",\"test_loss\":" + Num(e->loss) + "}");
    }
  }

  std::string accuracy;
  if (ShouldEval(c.eval, w.rank())) {
    auto e = task.Evaluate(params);
    if (!e.ok()) return Fail("evaluating", e.status());
    if (trace) {
      if (Status s = trace->Eval(w.step(), w.step() / per_epoch, e->accuracy, e->loss); !s.ok()) {
        return Fail("writing the trace", s);
      }
    }
    if (w.step() % per_epoch == 0) {
      Emit("{\"event\":\"eval\",\"worker\":" + id + ",\"step\":" + std::to_string(w.step()) +
           ",\"epoch\":" + std::to_string(w.step() / per_epoch) +
           ",\"test_accuracy\":" + Num(e->accuracy) + ",\"test_loss\":" + Num(e->loss) + "}");
    }
    accuracy = ",\"test_accuracy\":" + Num(e->accuracy);
  }
  const uint64_t final_step = w.step();
  termination.Stop();
  if (Status s = w.Leave(); !s.ok()) LOG_WARN("leaving: " << s.ToString());
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Emit("{\"event\":\"done\",\"worker\":" + id + ",\"steps\":" + std::to_string(final_step) +
       accuracy + ",\"params_crc\":" + ParamsCrc(params) + ",\"wall_s\":" + Num(wall) + "," +
       Bytes(w.traffic()) + "}");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  loco::FlagSet flags("loco-worker");
  DefineFlags(flags, &c);
  bool help = false;
  if (Status s = flags.Parse(argc, argv, &help); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  if (help) {
    std::cout << flags.Help();
    return 0;
  }
  if (c.print_markdown) {
    std::cout << flags.MarkdownRows();
    return 0;
  }
  std::vector<size_t> hidden;
  if (Status s = ParseHidden(c.hidden, &hidden); !s.ok()) {
    std::cerr << "loco-worker: " << s.message() << "\n";
    return 2;
  }
  if (c.error_bits != 8 && c.error_bits != 32) {
    std::cerr << "loco-worker: invalid value '" << c.error_bits
              << "' for --error-bits: expected 8 or 32\n";
    return 2;
  }
  if (c.bits != 2 && c.bits != 4 && c.bits != 8) {
    std::cerr << "loco-worker: invalid value '" << c.bits << "' for --bits: expected 2, 4 or 8\n";
    return 2;
  }
  if (c.lm_channels % c.lm_heads != 0) {
    std::cerr << "loco-worker: invalid value '" << c.lm_channels
              << "' for --lm-channels: expected a multiple of --lm-heads (" << c.lm_heads
              << ")\n";
    return 2;
  }
  if (c.join_at_step > 0 && c.wait_for_workers > 0) {
    std::cerr << "loco-worker: --join-at-step=" << c.join_at_step << " and --wait-for-workers="
              << c.wait_for_workers << " contradict each other: --wait-for-workers is for the "
              << "workers that start at step 0; a worker that joins later must not set it\n";
    return 2;
  }
  if (c.block_size % 32 != 0) {
    std::cerr << "loco-worker: invalid value '" << c.block_size
              << "' for --block-size: expected a multiple of 32 in [32, 4096]\n";
    return 2;
  }
  if (c.name.empty()) {
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "worker");
    c.name = std::string(host) + "-" + std::to_string(getpid());
  }
  loco::SetLogTag("worker " + c.name);
  // Before any thread exists (OpenBLAS, gRPC), so that every thread inherits
  // the mask and SIGTERM reaches the TerminationWatch only.
  if (Status s = loco::TerminationWatch::Install(); !s.ok()) {
    LOG_ERROR(s.ToString());
    return 1;
  }
  // OpenBLAS's thread pool is process state; set it once, before any product.
  openblas_set_num_threads(static_cast<int>(c.blas_threads));
  return Train(c, hidden);
}

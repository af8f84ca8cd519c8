// loco-worker: trains the built-in MLP on Fashion-MNIST as one data-parallel
// worker of a LoCo-PS cluster.
//
// Progress goes to stdout as JSON lines (parsed by the launcher; the keys are
// a contract), logs to stderr:
//   {"event":"step","worker":id,"rank":r,"world":w,"step":t,"loss":x,
//    "samples_per_s":y,"push_wire_bytes":…,"push_fp32_bytes":…,
//    "pull_wire_bytes":…,"pull_fp32_bytes":…,"resynced":b,"nonfinite":n}
//   {"event":"eval","worker":id,"step":t,"epoch":e,"test_accuracy":a,"test_loss":l}
//   {"event":"done","worker":id,"steps":n,["test_accuracy":a,]"wall_s":s, four byte counts}
// "step" is the global step the gradient was computed at; "samples_per_s" is
// this worker's own samples per second over the report window; byte counts
// are cumulative (worker/worker_stats.h); "steps" in "done" is the global
// step the worker reached.
//
// Exit status: 0 when training reached the target step, 2 for invalid flags,
// 1 for any other error (message on stderr).
#include <cblas.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/log.h"
#include "worker/batch_sampler.h"
#include "worker/fashion_mnist.h"
#include "worker/mlp.h"
#include "worker/worker.h"

namespace {

using loco::Status;

struct Config {
  std::string coordinator, name, codec, data_dir, hidden, eval;
  int64_t bits = 4, block_size = 128, reset_period = 0, error_bits = 8, seed = 0;
  int64_t global_batch = 256, epochs = 2, steps = 0, blas_threads = 1, report_every = 1;
  int64_t rpc_timeout_ms = 0, pull_wait_ms = 0, step_timeout_ms = 0, join_timeout_ms = 0;
  int64_t max_retries = 0;
  double beta = 0.5;
  bool stochastic_rounding = false, print_markdown = false;
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

void Emit(const std::string& json) {
  std::fwrite(json.data(), 1, json.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

bool ShouldEval(const std::string& policy, uint32_t rank) {
  return policy == "all" || (policy == "rank0" && rank == 0);
}

int Fail(const std::string& what, const Status& s) {
  LOG_ERROR(what << ": " << s.ToString());
  return 1;
}

int Train(const Config& c, const std::vector<size_t>& hidden) {
  const auto t0 = std::chrono::steady_clock::now();
  auto data = loco::FashionMnist::Load(c.data_dir);
  if (!data.ok()) return Fail("loading Fashion-MNIST", data.status());
  const loco::ImageSet& train = data->train();
  const loco::ImageSet& test = data->test();

  std::vector<size_t> sizes{train.pixels()};
  sizes.insert(sizes.end(), hidden.begin(), hidden.end());
  sizes.push_back(loco::FashionMnist::kClasses);
  auto mlp = loco::Mlp::Create(sizes);
  if (!mlp.ok()) return Fail("building the model", mlp.status());
  const std::vector<float> initial = mlp->InitialParameters(static_cast<uint64_t>(c.seed));

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
  auto connected = loco::Worker::Connect(o);
  if (!connected.ok()) {
    LOG_ERROR(connected.status().ToString());
    return 2;
  }
  loco::Worker& w = **connected;
  if (Status s = w.Join(mlp->num_parameters()); !s.ok()) return Fail("joining", s);
  std::vector<float> params;
  if (Status s = w.InitParameters(initial, &params); !s.ok()) return Fail("initialising", s);

  auto sampler = loco::BatchSampler::Create(train.size(), static_cast<size_t>(c.global_batch),
                                            static_cast<uint64_t>(c.seed));
  if (!sampler.ok()) return Fail("data sampler", sampler.status());
  const uint64_t per_epoch = sampler->steps_per_epoch();
  const uint64_t total = c.steps > 0 ? static_cast<uint64_t>(c.steps)
                                     : static_cast<uint64_t>(c.epochs) * per_epoch;
  const std::string id = std::to_string(w.worker_id());
  LOG_INFO("training " << mlp->num_parameters() << " parameters for " << total
                       << " steps from step " << w.step());

  std::vector<float> batch, grads;
  std::vector<uint8_t> labels;
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
      grads.assign(mlp->num_parameters(), 0.0f);
    } else {
      batch.resize(idx.size() * train.pixels());
      labels.resize(idx.size());
      for (size_t i = 0; i < idx.size(); ++i) {
        std::copy_n(train.images.data() + idx[i] * train.pixels(), train.pixels(),
                    batch.data() + i * train.pixels());
        labels[i] = train.labels[idx[i]];
      }
      auto l = mlp->LossAndGradient(params, batch, labels, &grads);
      if (!l.ok()) return Fail("computing the gradient", l.status());
      loss = *l;
    }
    auto r = w.Step(grads, &params);
    if (!r.ok()) return Fail("step " + std::to_string(t), r.status());
    window_samples += idx.size();
    if (++since_report >= static_cast<uint64_t>(c.report_every) || r->resynced) {
      const auto now = std::chrono::steady_clock::now();
      const double secs = std::chrono::duration<double>(now - window_start).count();
      const loco::TrafficStats tr = w.traffic();
      Emit("{\"event\":\"step\",\"worker\":" + id + ",\"rank\":" + std::to_string(rank) +
           ",\"world\":" + std::to_string(world) + ",\"step\":" + std::to_string(t) +
           ",\"loss\":" + Num(loss) + ",\"samples_per_s\":" +
           Num(secs > 0 ? static_cast<double>(window_samples) / secs : 0.0) + "," + Bytes(tr) +
           ",\"resynced\":" + (r->resynced ? "true" : "false") +
           ",\"nonfinite\":" + std::to_string(r->nonfinite) + "}");
      window_start = now;
      window_samples = 0;
      since_report = 0;
    }
    const uint64_t now_step = w.step();
    if (now_step / per_epoch > t / per_epoch && now_step < total &&
        ShouldEval(c.eval, w.rank())) {
      auto e = mlp->Evaluate(params, test.images, test.labels);
      if (!e.ok()) return Fail("evaluating", e.status());
      Emit("{\"event\":\"eval\",\"worker\":" + id + ",\"step\":" + std::to_string(now_step) +
           ",\"epoch\":" + std::to_string(now_step / per_epoch) +
           ",\"test_accuracy\":" + Num(e->accuracy) + ",\"test_loss\":" + Num(e->loss) + "}");
    }
  }

  std::string accuracy;
  if (ShouldEval(c.eval, w.rank())) {
    auto e = mlp->Evaluate(params, test.images, test.labels);
    if (!e.ok()) return Fail("evaluating", e.status());
    if (w.step() % per_epoch == 0) {
      Emit("{\"event\":\"eval\",\"worker\":" + id + ",\"step\":" + std::to_string(w.step()) +
           ",\"epoch\":" + std::to_string(w.step() / per_epoch) +
           ",\"test_accuracy\":" + Num(e->accuracy) + ",\"test_loss\":" + Num(e->loss) + "}");
    }
    accuracy = ",\"test_accuracy\":" + Num(e->accuracy);
  }
  const uint64_t final_step = w.step();
  if (Status s = w.Leave(); !s.ok()) LOG_WARN("leaving: " << s.ToString());
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Emit("{\"event\":\"done\",\"worker\":" + id + ",\"steps\":" + std::to_string(final_step) +
       accuracy + ",\"wall_s\":" + Num(wall) + "," + Bytes(w.traffic()) + "}");
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
  // OpenBLAS's thread pool is process state; set it once, before any product.
  openblas_set_num_threads(static_cast<int>(c.blas_threads));
  return Train(c, hidden);
}

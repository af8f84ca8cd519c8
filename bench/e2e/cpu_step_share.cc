// loco-bench-cpu-step: what a LoCo-4 training step costs the CPU, part by
// part, measured in one run (bench/README.md, "Kernels", "A CPU step"):
//   step:     Mlp::LossAndGradient (forward and backward of the MLP on one
//             batch, on one BLAS thread, as loco-worker --blas-threads 1:
//             a large layer's products for a batch SmallBatchGemm takes
//             (up to 64 rows on AVX-512, 32 on AVX2) on it, the rest on
//             OpenBLAS);
//   step on OpenBLAS: the same with every product on OpenBLAS
//             (loco-worker --cpu-products openblas), for their ratio;
//   compress: GradientEncoder::Encode of every shard of that gradient
//             (LoCo-4, the worker's default blocks, int8 error state), one
//             shard after the other, as the worker's push threads do;
//   server:   what the servers compute for the step, every shard on one
//             thread: RunShardStep (server/shard_step.h, what ShardService
//             runs) over --workers copies of this worker's payload;
//   apply:    ApplyPulledParams of every shard's returned delta
//             (--pull-bits codes, the server's 128-element blocks) to the
//             parameters, as the worker does with each answer;
//   copy:     a memcpy of the parameters (4 bytes each), the memory's pace;
// and the ratios of each to the step. Each figure is the median of --reps
// timed repetitions after 2 warm-up ones, in the same process, alternated
// within each repetition so that a slower stretch of a shared machine
// falls on all of them.
//
//   loco-bench-cpu-step [--hidden 3072,3072] [--batch 64] [--shards 2]
//                       [--pull-bits 8] [--workers 4] [--reps 20]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "bench/e2e/number_list.h"
#include "client/gradient_encoder.h"
#include "client/param_payload_decoder.h"
#include "client/worker_options.h"
#include "kernels/quantize.h"
#include "models/mlp.h"
#include "proto/loco.pb.h"
#include "server/owned_payload.h"
#include "server/return_path.h"
#include "server/shard_step.h"
#include "server/shard_store.h"
#include "server/step_aggregator.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

bool ParseLong(const std::string& s, long* out) {
  char* end = nullptr;
  *out = std::strtol(s.c_str(), &end, 10);
  return !s.empty() && *end == '\0';
}

constexpr const char* kUsage =
    "usage: loco-bench-cpu-step [--hidden 3072,3072 (positive sizes)] [--batch 1..4096] "
    "[--shards 1..64] [--pull-bits 2|4|8] [--workers 1..64] [--reps 1..1000]\n";

int Usage(const std::string& why) {
  std::fprintf(stderr, "loco-bench-cpu-step: %s\n%s", why.c_str(), kUsage);
  return 2;
}

// A delta answer for [offset, offset + length) at `version`, as the server's
// return path encodes it: block quantization of small random changes.
loco::v1::PullResponse DeltaAnswer(size_t offset, size_t length, int bits, uint64_t version,
                                   std::mt19937* rng) {
  constexpr int kBlock = 128;  // ReturnPathOptions' default
  std::normal_distribution<float> d(0.0f, 1e-4f);
  std::vector<float> delta(length);
  for (float& x : delta) x = d(*rng);
  std::vector<uint8_t> codes(loco::PackedBytes(length, bits));
  std::vector<float> scales(loco::NumBlocks(length, kBlock));
  loco::QuantizeParams q;
  q.bits = bits;
  q.block_size = kBlock;
  loco::QuantizeStats qs;
  (void)loco::cpu::Quantize(delta.data(), length, q, codes.data(), scales.data(), &qs);
  loco::v1::PullResponse r;
  r.set_version(version);
  r.set_is_delta(true);
  loco::v1::Payload* p = r.mutable_params();
  p->set_offset(offset);
  p->set_length(length);
  p->set_codec(loco::v1::CODEC_BLOCK_QUANT);
  p->set_bits(static_cast<uint32_t>(bits));
  p->set_block_size(kBlock);
  p->set_data(codes.data(), codes.size());
  p->set_scales(scales.data(), 4 * scales.size());
  return r;
}

// One shard's server state and the step it computes once every worker
// pushed (ShardService's, without the RPCs), on one thread.
class ServerShard {
 public:
  ServerShard(size_t offset, std::vector<float> values, int pull_bits)
      : range_{offset, values.size()}, return_path_(DeltaOptions(pull_bits)) {
    (void)store_.Initialize(range_, std::move(values));
    (void)store_.AllocateMoments();
    return_path_.Reset(store_.params(), 0);
  }

  // Holds `workers` copies of `pushed` for the next step (not timed: the
  // server receives them while the workers compute).
  loco::Status Receive(const loco::v1::Payload& pushed, int workers) {
    step_.Open(store_.version());
    for (int w = 1; w <= workers; ++w) {
      auto owned = loco::OwnedPayload::FromProto(pushed, range_);
      if (!owned.ok()) return owned.status();
      step_.Add(static_cast<uint64_t>(w), std::move(owned).value());
    }
    return loco::Status::Ok();
  }

  // The step as ShardService computes it (RunShardStep), on one thread.
  loco::Status Step() {
    LOCO_RETURN_IF_ERROR(step_.Validate(store_.length()));
    loco::ShardStepResult result;
    bool made_delta = false;
    loco::ShardStepHooks hooks;
    hooks.answer_begun = [&](const loco::ReturnPath::AnswerBuffers& d) {
      made_delta = d.data != nullptr;
    };
    LOCO_RETURN_IF_ERROR(loco::RunShardStep(store_, step_, return_path_, loco::AdamWParams{}, 1,
                                            hooks, &result));
    if (!made_delta) return loco::Internal("the return path made no delta buffers");
    return return_path_.FinishAnswer(store_.params(), store_.version(), std::move(result.answer));
  }

 private:
  static loco::ReturnPathOptions DeltaOptions(int pull_bits) {
    loco::ReturnPathOptions o;  // the server's defaults, bits aside
    o.codec = loco::PullCodec::kDelta;
    o.bits = pull_bits;
    o.full_sync_every = 0;  // a delta every step, as in all steps but every 50th
    return o;
  }

  loco::ShardRange range_;
  loco::ShardStore store_;
  loco::StepAggregator step_;
  loco::ReturnPath return_path_;
};

struct Config {
  std::vector<size_t> hidden{3072, 3072};
  long batch = 64, shards = 2, pull_bits = 8, workers = 4, reps = 20;
};

// Reads the flags into `config`. nullopt to go on; otherwise the exit code
// (0 after --help, 2 after a usage error, which it has printed).
std::optional<int> ParseFlags(int argc, char** argv, Config* config) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) return Usage("missing value after " + a);
    const std::string v = argv[++i];
    long* target = a == "--batch"       ? &config->batch
                   : a == "--shards"    ? &config->shards
                   : a == "--pull-bits" ? &config->pull_bits
                   : a == "--workers"   ? &config->workers
                   : a == "--reps"      ? &config->reps
                                        : nullptr;
    if (a == "--hidden") {
      config->hidden = loco::bench::ParseLayerSizes(v);
      if (config->hidden.empty()) {
        return Usage("--hidden takes positive layer sizes, e.g. 3072,3072");
      }
    } else if (target == nullptr) {
      return Usage("unknown flag " + a);
    } else if (!ParseLong(v, target)) {
      return Usage(a + " takes an integer, got '" + v + "'");
    }
  }
  const Config& c = *config;
  if (c.batch < 1 || c.batch > 4096) return Usage("--batch must be in 1..4096");
  if (c.shards < 1 || c.shards > 64) return Usage("--shards must be in 1..64");
  if (c.pull_bits != 2 && c.pull_bits != 4 && c.pull_bits != 8) {
    return Usage("--pull-bits must be 2, 4 or 8");
  }
  if (c.workers < 1 || c.workers > 64) return Usage("--workers must be in 1..64");
  if (c.reps < 1 || c.reps > 1000) return Usage("--reps must be in 1..1000");
  return std::nullopt;
}

// What one step touches: the model and a batch, and per shard the
// worker's encoder and the server's state, cut as the coordinator cuts
// them (whole blocks, evenly).
struct Bench {
  Bench(const Config& c, const loco::Mlp& model)
      : config(c), mlp(model), blas_mlp(model), n(model.num_parameters()) {
    blas_mlp.set_small_batch_gemm(false);
    params = mlp.InitialParameters(1);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    images.resize(static_cast<size_t>(c.batch) * 784);
    for (float& x : images) x = u(rng);
    labels.resize(static_cast<size_t>(c.batch));
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint8_t>(i % 10);
    CutShards();
  }

  size_t shard_length(size_t k) const { return offsets[k + 1] - offsets[k]; }
  std::span<float> shard_of(std::vector<float>& v, size_t k) const {
    return std::span<float>(v).subspan(offsets[k], shard_length(k));
  }

  const Config config;
  loco::Mlp mlp, blas_mlp;
  const size_t n;
  std::mt19937 rng{1};
  std::vector<float> params, images, grads, blas_grads;
  std::vector<uint8_t> labels;
  std::vector<size_t> offsets;  // shard k is [offsets[k], offsets[k + 1])
  std::vector<loco::GradientEncoder> encoders;
  std::vector<std::unique_ptr<ServerShard>> servers;
  std::vector<loco::v1::Payload> payloads;

 private:
  void CutShards() {
    loco::WorkerOptions o;
    o.codec = loco::PushCodec::kLoco;
    const size_t block = static_cast<size_t>(o.block_size);
    const size_t blocks = (n + block - 1) / block;
    const auto shards = static_cast<size_t>(config.shards);
    for (size_t k = 0; k < shards; ++k) {
      const size_t off = std::min(n, blocks * k / shards * block);
      const size_t end = std::min(n, blocks * (k + 1) / shards * block);
      offsets.push_back(off);
      encoders.emplace_back(o, 1, off, end - off);
    }
    offsets.push_back(n);
    for (size_t k = 0; k < shards; ++k) {
      const auto first = params.begin() + static_cast<std::ptrdiff_t>(offsets[k]);
      servers.push_back(std::make_unique<ServerShard>(
          offsets[k],
          std::vector<float>(first, first + static_cast<std::ptrdiff_t>(shard_length(k))),
          static_cast<int>(config.pull_bits)));
    }
    payloads.resize(shards);
  }
};

struct RepTimes {
  double step = 0, blas_step = 0, compress = 0, server = 0, apply = 0, copy = 0;
  size_t push_bytes = 0, pull_bytes = 0;
};

// The forward and backward pass on both product paths, in alternating
// order (whichever runs first meets colder caches).
loco::Status ComputeGradients(Bench& b, long rep, RepTimes* t) {
  loco::StatusOr<double> loss = 0.0, blas_loss = 0.0;
  const auto time_blas = [&] {
    const auto start = Clock::now();
    blas_loss = b.blas_mlp.LossAndGradient(b.params, b.images, b.labels, &b.blas_grads);
    return Seconds(start, Clock::now());
  };
  const bool blas_first = rep % 2 == 0;
  if (blas_first) t->blas_step = time_blas();
  const auto start = Clock::now();
  loss = b.mlp.LossAndGradient(b.params, b.images, b.labels, &b.grads);
  t->step = Seconds(start, Clock::now());
  if (!blas_first) t->blas_step = time_blas();
  return !loss.ok() ? loss.status() : blas_loss.status();
}

// Every shard's LoCo-4 push, one after the other as the push threads do.
loco::Status EncodeShards(Bench& b, long rep, RepTimes* t) {
  const auto start = Clock::now();
  for (size_t k = 0; k < b.encoders.size(); ++k) {
    loco::EncodeStats st;
    LOCO_RETURN_IF_ERROR(b.encoders[k].Encode(
        std::span<const float>(b.grads).subspan(b.offsets[k], b.shard_length(k)), rep,
        &b.payloads[k], &st));
    b.encoders[k].Commit();
    t->push_bytes += b.payloads[k].data().size() + b.payloads[k].scales().size();
  }
  t->compress = Seconds(start, Clock::now());
  return loco::Status::Ok();
}

// The servers' step over --workers copies of each push; only the step is
// timed (the servers receive the pushes while the workers compute).
loco::Status ServeShards(Bench& b, RepTimes* t) {
  for (size_t k = 0; k < b.servers.size(); ++k) {
    LOCO_RETURN_IF_ERROR(b.servers[k]->Receive(b.payloads[k], static_cast<int>(b.config.workers)));
  }
  const auto start = Clock::now();
  for (auto& server : b.servers) LOCO_RETURN_IF_ERROR(server->Step());
  t->server = Seconds(start, Clock::now());
  return loco::Status::Ok();
}

// The returned deltas applied to the parameters, then the memcpy of the
// parameters that paces them.
loco::Status ApplyAnswers(Bench& b, const std::vector<loco::v1::PullResponse>& answers, long rep,
                          std::vector<float>* copy, RepTimes* t) {
  const auto start = Clock::now();
  for (size_t k = 0; k < answers.size(); ++k) {
    auto applied = loco::ApplyPulledParams(answers[k], b.offsets[k], /*have_any=*/true,
                                           static_cast<uint64_t>(rep), b.shard_of(b.params, k));
    if (!applied.ok()) return applied.status();
    t->pull_bytes += *applied;
  }
  const auto applied = Clock::now();
  std::memcpy(copy->data(), b.params.data(), 4 * b.n);
  t->apply = Seconds(start, applied);
  t->copy = Seconds(applied, Clock::now());
  return loco::Status::Ok();
}

// One timed repetition. Its answers move the parameters on by one
// version; they are made before the clock starts (the server's work, not
// the worker's).
loco::StatusOr<RepTimes> RunRepetition(Bench& b, long rep, std::vector<float>* copy) {
  std::vector<loco::v1::PullResponse> answers;
  for (size_t k = 0; k < b.encoders.size(); ++k) {
    answers.push_back(DeltaAnswer(b.offsets[k], b.shard_length(k),
                                  static_cast<int>(b.config.pull_bits),
                                  static_cast<uint64_t>(rep + 1), &b.rng));
  }
  RepTimes t;
  LOCO_RETURN_IF_ERROR(ComputeGradients(b, rep, &t).Annotate("step"));
  LOCO_RETURN_IF_ERROR(EncodeShards(b, rep, &t).Annotate("encode"));
  LOCO_RETURN_IF_ERROR(ServeShards(b, &t).Annotate("server"));
  LOCO_RETURN_IF_ERROR(ApplyAnswers(b, answers, rep, copy, &t).Annotate("apply"));
  return t;
}

void Report(const Config& c, size_t n, const std::vector<RepTimes>& reps, float copy0) {
  const auto median = [&reps](double RepTimes::*field) {
    std::vector<double> v;
    for (const RepTimes& t : reps) v.push_back(t.*field);
    return Median(std::move(v));
  };
  const double step = median(&RepTimes::step), blas_step = median(&RepTimes::blas_step),
               compress = median(&RepTimes::compress), server = median(&RepTimes::server),
               apply = median(&RepTimes::apply), copy_t = median(&RepTimes::copy);
  const size_t wire = reps.back().push_bytes, pull_wire = reps.back().pull_bytes;
  std::printf(
      "params %zu  batch %ld  shards %ld  pull bits %ld  workers %ld  reps %ld  "
      "(copy[0] %g)\n",
      n, c.batch, c.shards, c.pull_bits, c.workers, c.reps, static_cast<double>(copy0));
  std::printf("step (forward+backward) median s: %.6f\n", step);
  std::printf("step on OpenBLAS products median s: %.6f (OpenBLAS / default: %.3f)\n",
              blas_step, blas_step / step);
  std::printf("compress (LoCo-4, every shard) median s: %.6f\n", compress);
  std::printf("server (every shard, %ld payloads) median s: %.6f\n", c.workers, server);
  std::printf("apply (the returned deltas) median s: %.6f\n", apply);
  std::printf("copy (memcpy of the parameters) median s: %.6f\n", copy_t);
  std::printf("push bytes: %zu (%.3f of fp32); pull bytes: %zu (%.3f of fp32)\n", wire,
              static_cast<double>(wire) / (4.0 * static_cast<double>(n)), pull_wire,
              static_cast<double>(pull_wire) / (4.0 * static_cast<double>(n)));
  std::printf("compress / step: %.4f\n", compress / step);
  std::printf("apply / step: %.4f\n", apply / step);
  std::printf("(compress + apply) / step: %.4f\n", (compress + apply) / step);
  std::printf("server / step: %.4f\n", server / step);
  std::printf("compress / copy: %.2f  apply / copy: %.2f\n", compress / copy_t, apply / copy_t);
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  if (std::optional<int> ended = ParseFlags(argc, argv, &config)) return *ended;
  openblas_set_num_threads(1);
  std::vector<size_t> sizes{784};
  sizes.insert(sizes.end(), config.hidden.begin(), config.hidden.end());
  sizes.push_back(10);
  auto mlp = loco::Mlp::Create(sizes);
  if (!mlp.ok()) {
    std::fprintf(stderr, "Mlp: %s\n", mlp.status().ToString().c_str());
    return 1;
  }
  Bench bench(config, *mlp);
  std::vector<float> copy(bench.n);
  std::vector<RepTimes> timed;
  for (long rep = 0; rep < config.reps + 2; ++rep) {  // the first 2 warm up
    auto t = RunRepetition(bench, rep, &copy);
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      return 1;
    }
    if (rep >= 2) timed.push_back(*t);
  }
  Report(config, bench.n, timed, copy[0]);
  return 0;
}

// loco-bench-cpu-step: what a LoCo-4 training step costs the CPU, part by
// part, measured in one run (bench/README.md, "Kernels", "A CPU step"):
//   step:     Mlp::LossAndGradient (forward and backward of the MLP on one
//             batch, on one BLAS thread, as loco-worker --blas-threads 1:
//             a large layer's products for a batch of at most 32 rows on
//             SmallBatchGemm, the rest on OpenBLAS);
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
#include <random>
#include <string>
#include <vector>

#include "kernels/quantize.h"
#include "proto/loco.pb.h"
#include "server/owned_payload.h"
#include "server/return_path.h"
#include "server/shard_step.h"
#include "server/shard_store.h"
#include "server/step_aggregator.h"
#include "client/gradient_encoder.h"
#include "models/mlp.h"
#include "client/param_payload_decoder.h"
#include "client/worker_options.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// "3072,3072" -> {3072, 3072}; empty on anything but positive integers.
std::vector<size_t> ParseSizes(const std::string& s) {
  std::vector<size_t> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    const std::string item = s.substr(pos, comma - pos);
    char* end = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v == 0 || v > (1u << 24)) return {};
    out.push_back(static_cast<size_t>(v));
    pos = comma + 1;
  }
  return out;
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

}  // namespace

int main(int argc, char** argv) {
  std::string hidden = "3072,3072";
  long batch = 64, shards = 2, pull_bits = 8, workers = 4, reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) return Usage("missing value after " + a);
    const std::string v = argv[++i];
    long* target = a == "--batch"       ? &batch
                   : a == "--shards"    ? &shards
                   : a == "--pull-bits" ? &pull_bits
                   : a == "--workers"   ? &workers
                   : a == "--reps"      ? &reps
                                        : nullptr;
    if (a == "--hidden") {
      hidden = v;
    } else if (target == nullptr) {
      return Usage("unknown flag " + a);
    } else if (!ParseLong(v, target)) {
      return Usage(a + " takes an integer, got '" + v + "'");
    }
  }
  const std::vector<size_t> hidden_sizes = ParseSizes(hidden);
  if (hidden_sizes.empty()) return Usage("--hidden takes positive layer sizes, e.g. 3072,3072");
  if (batch < 1 || batch > 4096) return Usage("--batch must be in 1..4096");
  if (shards < 1 || shards > 64) return Usage("--shards must be in 1..64");
  if (pull_bits != 2 && pull_bits != 4 && pull_bits != 8) {
    return Usage("--pull-bits must be 2, 4 or 8");
  }
  if (workers < 1 || workers > 64) return Usage("--workers must be in 1..64");
  if (reps < 1 || reps > 1000) return Usage("--reps must be in 1..1000");
  openblas_set_num_threads(1);

  std::vector<size_t> sizes{784};
  sizes.insert(sizes.end(), hidden_sizes.begin(), hidden_sizes.end());
  sizes.push_back(10);
  auto mlp = loco::Mlp::Create(sizes);
  if (!mlp.ok()) {
    std::fprintf(stderr, "Mlp: %s\n", mlp.status().ToString().c_str());
    return 1;
  }
  const size_t n = mlp->num_parameters();
  loco::Mlp blas_mlp = *mlp;
  blas_mlp.set_small_batch_gemm(false);
  std::vector<float> params = mlp->InitialParameters(1);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> images(static_cast<size_t>(batch) * 784);
  for (float& x : images) x = u(rng);
  std::vector<uint8_t> labels(static_cast<size_t>(batch));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint8_t>(i % 10);

  // Shards as the coordinator cuts them: whole blocks, evenly.
  loco::WorkerOptions o;
  o.codec = loco::PushCodec::kLoco;
  const size_t block = static_cast<size_t>(o.block_size);
  const size_t blocks = (n + block - 1) / block;
  std::vector<size_t> offsets;
  std::vector<loco::GradientEncoder> encoders;
  for (long k = 0; k < shards; ++k) {
    const size_t off = std::min(n, blocks * static_cast<size_t>(k) /
                                       static_cast<size_t>(shards) * block);
    const size_t end = std::min(n, blocks * static_cast<size_t>(k + 1) /
                                       static_cast<size_t>(shards) * block);
    offsets.push_back(off);
    encoders.emplace_back(o, 1, off, end - off);
  }
  offsets.push_back(n);
  std::vector<std::unique_ptr<ServerShard>> servers;
  for (size_t k = 0; k < encoders.size(); ++k) {
    servers.push_back(std::make_unique<ServerShard>(
        offsets[k],
        std::vector<float>(params.begin() + static_cast<std::ptrdiff_t>(offsets[k]),
                           params.begin() + static_cast<std::ptrdiff_t>(offsets[k + 1])),
        static_cast<int>(pull_bits)));
  }

  std::vector<float> grads, blas_grads, copy(n);
  std::vector<loco::v1::Payload> payloads(encoders.size());
  std::vector<double> step_s, blas_step_s, compress_s, server_s, apply_s, copy_s;
  size_t wire = 0, pull_wire = 0;
  for (long r = 0; r < reps + 2; ++r) {
    // Each repetition's answers move the parameters on by one version;
    // made before the clock starts (the server's work, not the worker's).
    std::vector<loco::v1::PullResponse> answers;
    for (size_t k = 0; k < encoders.size(); ++k) {
      answers.push_back(DeltaAnswer(offsets[k], offsets[k + 1] - offsets[k],
                                    static_cast<int>(pull_bits), static_cast<uint64_t>(r + 1),
                                    &rng));
    }
    // The two steps in alternating order: whichever runs first meets
    // colder caches.
    const bool blas_first = r % 2 == 0;
    loco::StatusOr<double> blas_loss = 0.0;
    const auto time_blas = [&] {
      const auto start = Clock::now();
      blas_loss = blas_mlp.LossAndGradient(params, images, labels, &blas_grads);
      return Seconds(start, Clock::now());
    };
    double blas_step_time = blas_first ? time_blas() : 0.0;
    const auto t0 = Clock::now();
    auto loss = mlp->LossAndGradient(params, images, labels, &grads);
    const auto t1 = Clock::now();
    if (!blas_first) blas_step_time = time_blas();
    const auto compress_start = Clock::now();
    if (!loss.ok() || !blas_loss.ok()) {
      std::fprintf(stderr, "step: %s\n",
                   (loss.ok() ? blas_loss.status() : loss.status()).ToString().c_str());
      return 1;
    }
    wire = 0;
    for (size_t k = 0; k < encoders.size(); ++k) {
      loco::EncodeStats st;
      const loco::Status s = encoders[k].Encode(
          std::span<const float>(grads).subspan(offsets[k], offsets[k + 1] - offsets[k]), r,
          &payloads[k], &st);
      if (!s.ok()) {
        std::fprintf(stderr, "encode: %s\n", s.ToString().c_str());
        return 1;
      }
      encoders[k].Commit();
      wire += payloads[k].data().size() + payloads[k].scales().size();
    }
    const auto encoded = Clock::now();
    for (size_t k = 0; k < servers.size(); ++k) {
      const loco::Status s = servers[k]->Receive(payloads[k], static_cast<int>(workers));
      if (!s.ok()) {
        std::fprintf(stderr, "server receive: %s\n", s.ToString().c_str());
        return 1;
      }
    }
    const auto t2s = Clock::now();
    for (auto& server : servers) {
      const loco::Status s = server->Step();
      if (!s.ok()) {
        std::fprintf(stderr, "server step: %s\n", s.ToString().c_str());
        return 1;
      }
    }
    const auto t2 = Clock::now();
    pull_wire = 0;
    for (size_t k = 0; k < encoders.size(); ++k) {
      auto applied = loco::ApplyPulledParams(
          answers[k], offsets[k], /*have_any=*/true, static_cast<uint64_t>(r),
          std::span<float>(params).subspan(offsets[k], offsets[k + 1] - offsets[k]));
      if (!applied.ok()) {
        std::fprintf(stderr, "apply: %s\n", applied.status().ToString().c_str());
        return 1;
      }
      pull_wire += *applied;
    }
    const auto t3 = Clock::now();
    std::memcpy(copy.data(), params.data(), 4 * n);
    const auto t4 = Clock::now();
    if (r >= 2) {
      step_s.push_back(Seconds(t0, t1));
      blas_step_s.push_back(blas_step_time);
      compress_s.push_back(Seconds(compress_start, encoded));
      server_s.push_back(Seconds(t2s, t2));
      apply_s.push_back(Seconds(t2, t3));
      copy_s.push_back(Seconds(t3, t4));
    }
  }
  const double step = Median(step_s), compress = Median(compress_s),
               server = Median(server_s), apply = Median(apply_s), copy_t = Median(copy_s);
  std::printf("params %zu  batch %ld  shards %ld  pull bits %ld  workers %ld  reps %ld  "
              "(copy[0] %g)\n",
              n, batch, shards, pull_bits, workers, reps, static_cast<double>(copy[0]));
  const double blas_step = Median(blas_step_s);
  std::printf("step (forward+backward) median s: %.6f\n", step);
  std::printf("step on OpenBLAS products median s: %.6f (OpenBLAS / default: %.3f)\n",
              blas_step, blas_step / step);
  std::printf("compress (LoCo-4, every shard) median s: %.6f\n", compress);
  std::printf("server (every shard, %ld payloads) median s: %.6f\n", workers, server);
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
  return 0;
}

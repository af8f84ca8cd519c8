// loco-bench-gpu-step: what LoCo compression on the device adds to a GPU
// training step, measured in one run (bench/README.md, "CUDA"):
//   step:     CudaMlp::LossAndGradientKeptOnDevice (forward and backward of
//             the MLP on one batch; the gradient stays on the device);
//   compress: DeviceGradientEncoder::Encode of every shard of that gradient
//             (LoCo-4, B = 128, int8 error state), including the payload's
//             copy to the host message, one shard after the other;
// and their ratio (target: compress <= 5% of step). Each is the median of
// --reps timed repetitions after 3 warm-up ones. CUDA builds only; exits 2
// without a device.
//
//   loco-bench-gpu-step [--hidden 3072,3072] [--batch 64] [--shards 2] [--reps 30]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/e2e/number_list.h"
#include "kernels/device.h"
#include "client/device_gradient_encoder.h"
#include "models/mlp_cuda.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "loco-bench-gpu-step: %s\nusage: loco-bench-gpu-step [--hidden 3072,3072] "
               "[--batch N>=1] [--shards 1..64] [--reps 1..1000]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string hidden = "3072,3072";
  long batch = 64, shards = 2, reps = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Usage(("missing value after " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--hidden") {
      hidden = v;
    } else if (a == "--batch") {
      batch = std::atol(v.c_str());
    } else if (a == "--shards") {
      shards = std::atol(v.c_str());
    } else if (a == "--reps") {
      reps = std::atol(v.c_str());
    } else {
      return Usage(("unknown flag " + a).c_str());
    }
  }
  if (batch < 1 || shards < 1 || shards > 64 || reps < 1 || reps > 1000) {
    return Usage("a value is out of range");
  }
  if (loco::cuda::DeviceCount() == 0) {
    std::fprintf(stderr, "loco-bench-gpu-step: no CUDA device; nothing measured\n");
    return 2;
  }
  std::vector<size_t> sizes{784};
  const std::vector<size_t> hidden_sizes = loco::bench::ParseLayerSizes(hidden);
  if (hidden_sizes.empty()) return Usage("--hidden needs positive layer sizes, e.g. 3072,3072");
  sizes.insert(sizes.end(), hidden_sizes.begin(), hidden_sizes.end());
  sizes.push_back(10);
  auto mlp = loco::CudaMlp::Create(sizes, 0, static_cast<size_t>(batch));
  if (!mlp.ok()) {
    std::fprintf(stderr, "CudaMlp: %s\n", mlp.status().ToString().c_str());
    return 1;
  }
  const size_t n = (*mlp)->num_parameters();
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  std::vector<float> params(n), images(static_cast<size_t>(batch) * 784);
  for (float& x : params) x = u(rng);
  for (float& x : images) x = u(rng) + 0.05f;
  std::vector<uint8_t> labels(static_cast<size_t>(batch));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint8_t>(i % 10);

  // Shards as the coordinator cuts them: whole blocks of 128, evenly.
  loco::WorkerOptions o;
  o.codec = loco::PushCodec::kLoco;
  std::vector<std::unique_ptr<loco::DeviceGradientEncoder>> encoders;
  std::vector<size_t> offsets;
  const size_t blocks = (n + 127) / 128;
  for (long k = 0; k < shards; ++k) {
    const size_t b0 = blocks * static_cast<size_t>(k) / static_cast<size_t>(shards);
    const size_t b1 = blocks * static_cast<size_t>(k + 1) / static_cast<size_t>(shards);
    const size_t off = b0 * 128, len = std::min(n, b1 * 128) - off;
    auto e = loco::DeviceGradientEncoder::Create(o, 1, off, len, 0);
    if (!e.ok()) {
      std::fprintf(stderr, "DeviceGradientEncoder: %s\n", e.status().ToString().c_str());
      return 1;
    }
    encoders.push_back(std::move(e).value());
    offsets.push_back(off);
  }
  offsets.push_back(n);

  std::vector<double> step_s, compress_s;
  std::vector<loco::v1::Payload> payloads(encoders.size());
  for (long r = 0; r < reps + 3; ++r) {
    const auto t0 = Clock::now();
    auto loss = (*mlp)->LossAndGradientKeptOnDevice(params, images, labels);
    const auto t1 = Clock::now();
    if (!loss.ok()) {
      std::fprintf(stderr, "step: %s\n", loss.status().ToString().c_str());
      return 1;
    }
    const std::span<const float> g = (*mlp)->device_gradients();
    for (size_t k = 0; k < encoders.size(); ++k) {
      loco::EncodeStats st;
      const loco::Status s = encoders[k]->Encode(
          g.subspan(offsets[k], offsets[k + 1] - offsets[k]), r, &payloads[k], &st);
      if (!s.ok()) {
        std::fprintf(stderr, "encode: %s\n", s.ToString().c_str());
        return 1;
      }
      encoders[k]->Commit();
    }
    const auto t2 = Clock::now();
    if (r >= 3) {
      step_s.push_back(std::chrono::duration<double>(t1 - t0).count());
      compress_s.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
  }
  const double step = Median(step_s), compress = Median(compress_s);
  size_t wire = 0;
  for (const auto& p : payloads) wire += p.data().size() + p.scales().size();
  std::printf("params %zu  batch %ld  shards %ld  reps %ld\n", n, batch, shards, reps);
  std::printf("step (forward+backward) median s: %.6f\n", step);
  std::printf("compress (LoCo-4 on device + payload to host) median s: %.6f\n", compress);
  std::printf("payload bytes: %zu (%.3f of fp32)\n", wire,
              static_cast<double>(wire) / (4.0 * static_cast<double>(n)));
  std::printf("compress / step: %.4f (target <= 0.05)\n", compress / step);
  return 0;
}

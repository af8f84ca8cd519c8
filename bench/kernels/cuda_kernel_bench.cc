#include "cuda_kernel_bench.h"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bytes_moved.h"
#include "kernels/adamw.h"
#include "kernels/cuda_check.h"
#include "kernels/decode_accumulate.h"
#include "kernels/device.h"
#include "kernels/loco_compress.h"
#include "kernels/quantize.h"

namespace loco::bench {
namespace {

// Owning device allocation, zero-filled; empty() when cudaMalloc failed.
class DeviceArray {
 public:
  explicit DeviceArray(size_t bytes) {
    if (cudaMalloc(&ptr_, bytes) != cudaSuccess || cudaMemset(ptr_, 0, bytes) != cudaSuccess) ptr_ = nullptr;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
  }
  bool empty() const { return ptr_ == nullptr; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

// Host-generated values in (-1, 1) copied to the device.
Status UploadUniform(float* dst, size_t n, uint64_t seed) {
  std::vector<float> host(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& v : host) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    v = static_cast<float>(static_cast<int64_t>(s >> 40) - (int64_t{1} << 23)) * (1.0f / 8388608.0f);
  }
  LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  return Status::Ok();
}

struct DeviceLocoWorkload {
  explicit DeviceLocoWorkload(size_t n)
      : n(n), g(n * 4), ecodes(n), escales(NumBlocks(n, kBlock) * 4), codes(PackedBytes(n, kBits)),
        scales(NumBlocks(n, kBlock) * 4) {
    p.bits = kBits;
    p.block_size = kBlock;
  }
  Status Init() {
    if (g.empty() || ecodes.empty() || escales.empty() || codes.empty() || scales.empty()) {
      return ResourceExhausted("cudaMalloc failed for the LoCo workload");
    }
    return UploadUniform(g.as<float>(), n, 1);
  }
  Status Run(int64_t step) {
    ErrorStateView state;
    state.codes = ecodes.as<int8_t>();
    state.scales = escales.as<float>();
    return cuda::LocoCompress(g.as<float>(), n, step, p, state, codes.as<uint8_t>(), scales.as<float>(), nullptr,
                              nullptr);
  }
  static size_t Bytes(size_t n) { return LocoCompressBytes(n, kBits, kBlock); }

  size_t n;
  DeviceArray g, ecodes, escales, codes, scales;
  LocoParams p;
};

struct DeviceDecodeWorkload {
  explicit DeviceDecodeWorkload(size_t n) : n(n), out(n * 4), x(n * 4) {
    for (int w = 0; w < kWorkers; ++w) {
      codes.push_back(std::make_unique<DeviceArray>(PackedBytes(n, kBits)));
      scales.push_back(std::make_unique<DeviceArray>(NumBlocks(n, kBlock) * 4));
    }
  }
  Status Init() {
    if (out.empty() || x.empty()) return ResourceExhausted("cudaMalloc failed for the decode workload");
    QuantizeParams q;
    q.bits = kBits;
    q.block_size = kBlock;
    for (int w = 0; w < kWorkers; ++w) {
      if (codes[w]->empty() || scales[w]->empty()) return ResourceExhausted("cudaMalloc failed for a payload");
      LOCO_RETURN_IF_ERROR(UploadUniform(x.as<float>(), n, 10 + static_cast<uint64_t>(w)));
      LOCO_RETURN_IF_ERROR(cuda::Quantize(x.as<float>(), n, q, codes[w]->as<uint8_t>(), scales[w]->as<float>(),
                                          nullptr, nullptr));
      views[w].codec = PayloadCodec::kBlockQuant;
      views[w].bits = kBits;
      views[w].block_size = kBlock;
      views[w].data = codes[w]->as<uint8_t>();
      views[w].data_bytes = PackedBytes(n, kBits);
      views[w].scales = scales[w]->as<float>();
      views[w].num_scales = NumBlocks(n, kBlock);
    }
    LOCO_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    return Status::Ok();
  }
  Status Run(int64_t) { return cuda::DecodeAccumulate(views, kWorkers, n, out.as<float>(), nullptr); }
  static size_t Bytes(size_t n) { return DecodeAccumulateBytes(n, kWorkers, kBits, kBlock); }

  size_t n;
  DeviceArray out, x;
  std::vector<std::unique_ptr<DeviceArray>> codes, scales;
  PayloadView views[kWorkers];
};

struct DeviceAdamWWorkload {
  explicit DeviceAdamWWorkload(size_t n) : n(n), params(n * 4), m(n * 4), v(n * 4), grad(n * 4) {
    p.weight_decay = 0.01f;
  }
  Status Init() {
    if (params.empty() || m.empty() || v.empty() || grad.empty()) {
      return ResourceExhausted("cudaMalloc failed for the AdamW workload");
    }
    LOCO_RETURN_IF_ERROR(UploadUniform(params.as<float>(), n, 20));
    return UploadUniform(grad.as<float>(), n, 21);
  }
  Status Run(int64_t step) {
    return cuda::AdamW(params.as<float>(), m.as<float>(), v.as<float>(), grad.as<float>(), n, step + 1, p, 1.0f,
                       nullptr);
  }
  static size_t Bytes(size_t n) { return AdamWBytes(n); }

  size_t n;
  DeviceArray params, m, v, grad;
  AdamWParams p;
};

// Seconds between two events around `fn` on the default stream.
template <typename Fn>
Status TimeOnDevice(Fn&& fn, double* seconds) {
  cudaEvent_t start, stop;
  LOCO_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  LOCO_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  LOCO_CUDA_RETURN_IF_ERROR(cudaEventRecord(start, nullptr));
  Status s = fn();
  LOCO_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, nullptr));
  LOCO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
  float ms = 0.0f;
  LOCO_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, stop));
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  *seconds = static_cast<double>(ms) * 1e-3;
  return s;
}

// Fastest of `reps` cudaMemcpy device-to-device calls moving `bytes` in
// total (bytes/2 read and bytes/2 written).
Status BestCopySeconds(size_t bytes, int64_t reps, double* best) {
  const size_t half = bytes / 2;
  DeviceArray src(half), dst(half);
  if (src.empty() || dst.empty()) return ResourceExhausted("cudaMalloc failed for the copy baseline");
  auto copy = [&]() -> Status {
    LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst.as<char>(), src.as<char>(), half, cudaMemcpyDeviceToDevice, nullptr));
    return Status::Ok();
  };
  LOCO_RETURN_IF_ERROR(copy());  // warm-up
  *best = 1e30;
  for (int64_t r = 0; r < reps; ++r) {
    double seconds = 0.0;
    LOCO_RETURN_IF_ERROR(TimeOnDevice(copy, &seconds));
    *best = std::min(*best, seconds);
  }
  return Status::Ok();
}

// Time column: mean event time per call. The ratio uses the fastest call of
// the kernel and of the copy, as the CPU benchmarks do.
template <typename Workload>
void RunCudaBenchmark(benchmark::State& st, size_t n) {
  const size_t bytes = Workload::Bytes(n);
  double kernel_best = 1e30;
  {
    Workload w(n);
    Status s = w.Init();
    if (s.ok()) s = w.Run(0);  // warm-up
    if (!s.ok()) {
      st.SkipWithError(s.ToString().c_str());
      return;
    }
    int64_t step = 0;
    for (auto _ : st) {
      double seconds = 0.0;
      s = TimeOnDevice([&] { return w.Run(++step); }, &seconds);
      if (!s.ok()) {
        st.SkipWithError(s.ToString().c_str());
        return;
      }
      st.SetIterationTime(seconds);
      kernel_best = std::min(kernel_best, seconds);
    }
  }
  st.SetBytesProcessed(st.iterations() * static_cast<int64_t>(bytes));
  double copy_best = 0.0;
  if (Status s = BestCopySeconds(bytes, std::max<int64_t>(10, st.iterations()), &copy_best); !s.ok()) {
    st.SkipWithError(s.ToString().c_str());
    return;
  }
  st.counters["MB_moved"] = static_cast<double>(bytes) / 1e6;
  st.counters["best_GB/s"] = static_cast<double>(bytes) / kernel_best / 1e9;
  st.counters["copy_best_GB/s"] = static_cast<double>(bytes) / copy_best / 1e9;
  st.counters["ratio_vs_copy"] = copy_best / kernel_best;
}

template <typename Workload>
void RegisterDevice(const std::string& kernel, const BenchConfig& config) {
  for (size_t n : config.sizes) {
    const std::string name = "cuda/" + kernel + "/n:" + std::to_string(n);
    benchmark::RegisterBenchmark(name.c_str(), [n](benchmark::State& st) { RunCudaBenchmark<Workload>(st, n); })
        ->Iterations(config.CudaIterations(n))
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

bool RegisterCudaKernelBenchmarks(const BenchConfig& config) {
  if (cuda::DeviceCount() == 0) return false;
  RegisterDevice<DeviceLocoWorkload>("loco_compress_4bit", config);
  RegisterDevice<DeviceDecodeWorkload>("decode_accumulate_4x4bit", config);
  RegisterDevice<DeviceAdamWWorkload>("adamw", config);
  return true;
}

}  // namespace loco::bench

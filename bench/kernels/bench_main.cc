// loco-bench-kernels: throughput of the LoCo kernels as a fraction of a
// memory copy of the same bytes on the same machine (bench/README.md).
//
//   loco-bench-kernels            2^24 and 2^26 elements (a few minutes on 2 cores)
//   loco-bench-kernels --quick    2^20 elements, 3 iterations (CI smoke, seconds)
// Every Google Benchmark flag works too, e.g. --benchmark_filter='^cpu/adamw'.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "bench_config.h"
#include "cpu_kernel_bench.h"
#include "kernels/device.h"
#ifdef LOCO_BENCH_CUDA
#include "cuda_kernel_bench.h"
#endif

int main(int argc, char** argv) {
  loco::bench::BenchConfig config;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strcmp(argv[i], "--quick") == 0) {
      config.quick = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  config.sizes = config.quick ? std::vector<size_t>{size_t{1} << 20}
                              : std::vector<size_t>{size_t{1} << 24, size_t{1} << 26};
  loco::bench::RegisterCpuKernelBenchmarks(config);
#ifdef LOCO_BENCH_CUDA
  if (!loco::bench::RegisterCudaKernelBenchmarks(config)) {
    std::fprintf(stderr, "loco-bench-kernels: built with CUDA but no device found; CUDA benchmarks skipped\n");
  }
#else
  std::fprintf(stderr, "loco-bench-kernels: built without CUDA; CPU benchmarks only\n");
#endif
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// CUDA kernel benchmarks (built with CUDA, registered only when a device is
// present): the same three kernels and sizes as the CPU benchmarks, timed
// with CUDA events, against cudaMemcpy device-to-device of the same bytes.
#pragma once

#include "bench_config.h"

namespace loco::bench {

// Returns false (and registers nothing) when no CUDA device is present.
bool RegisterCudaKernelBenchmarks(const BenchConfig& config);

}  // namespace loco::bench

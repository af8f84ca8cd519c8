// CPU kernel benchmarks: LoCo compress (4-bit, LoCo mode, int8 error state),
// decode-and-accumulate of 4 four-bit payloads, and AdamW, each on one core
// and on all cores, each with a memcpy of the same bytes measured in the
// same benchmark (counters copy_GB/s and ratio_vs_copy).
#pragma once

#include "bench_config.h"

namespace loco::bench {

void RegisterCpuKernelBenchmarks(const BenchConfig& config);

}  // namespace loco::bench

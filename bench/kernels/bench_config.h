// What the kernel benchmarks measure: the one workload shape the CPU and
// the CUDA kernels share, which sizes they run and for how many iterations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <vector>

namespace loco::bench {

// 4-bit codes in blocks of 128 elements, and 4 workers' payloads for
// decode-accumulate: the same on the CPU and on the device, so that their
// figures compare.
inline constexpr int kBits = 4;
inline constexpr int kBlock = 128;
inline constexpr int kWorkers = 4;

struct BenchConfig {
  std::vector<size_t> sizes;  // elements per kernel call
  bool quick = false;         // CI smoke mode: one small size, few iterations

  // Fixed iteration counts keep the whole run short and predictable (each
  // benchmark body runs once instead of being re-run to calibrate).
  int64_t CpuIterations(size_t n) const {
    return quick ? 3 : static_cast<int64_t>(n >= (size_t{1} << 28) ? 3 : std::max<size_t>(3, (size_t{1} << 28) / n));
  }
  int64_t CudaIterations(size_t n) const {
    return quick ? 5 : static_cast<int64_t>(std::max<size_t>(20, (size_t{1} << 31) / n));
  }
};

}  // namespace loco::bench

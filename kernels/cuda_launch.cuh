// Launch geometry and warp-level reductions shared by the CUDA kernels.
// Device-only helpers; included by the .cu files alone.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace loco::cuda {

constexpr int kWarpSize = 32;
// Threads per block of the element-wise kernels.
constexpr int kElementwiseThreads = 256;
// Element-wise kernels use grid-stride loops, so the grid never needs to
// exceed what keeps every SM busy; this cap also keeps gridDim.x in range for
// any size_t length.
constexpr size_t kMaxElementwiseBlocks = 65536;

// Blocks for `items` work items at `per_block` items per block, capped.
inline unsigned ElementwiseGrid(size_t items, size_t per_block) {
  size_t blocks = (items + per_block - 1) / per_block;
  return static_cast<unsigned>(std::clamp<size_t>(blocks, 1, kMaxElementwiseBlocks));
}

// Quantization kernels run one warp per quantization block and stage the
// block in shared memory (`floats_per_element` floats per element), several
// warps per CTA while the staging stays within 16 KiB.
struct WarpPerBlockLaunch {
  unsigned grid = 1;
  unsigned threads = kWarpSize;
  size_t shared_bytes = 0;
  int warps_per_cta = 1;
};

inline WarpPerBlockLaunch WarpPerBlockGeometry(size_t num_blocks, int block_size,
                                               int floats_per_element) {
  WarpPerBlockLaunch l;
  const size_t per_warp =
      static_cast<size_t>(block_size) * sizeof(float) * static_cast<size_t>(floats_per_element);
  l.warps_per_cta = static_cast<int>(std::clamp<size_t>(16384 / per_warp, 1, 8));
  l.threads = static_cast<unsigned>(l.warps_per_cta * kWarpSize);
  l.shared_bytes = per_warp * static_cast<size_t>(l.warps_per_cta);
  l.grid = static_cast<unsigned>((num_blocks + l.warps_per_cta - 1) / l.warps_per_cta);
  return l;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    float o = __shfl_xor_sync(0xFFFFFFFFu, v, offset);
    v = o > v ? o : v;
  }
  return v;
}

template <typename T>
__device__ __forceinline__ T WarpSum(T v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  return v;
}

__device__ __forceinline__ bool Aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// Writes the `nbytes` low bytes of `word` (little-endian) at dst, skipping
// bytes at or past `limit` (the end of the packed buffer).
__device__ __forceinline__ void StorePackedBytes(uint8_t* base, size_t offset, uint32_t word,
                                                 int nbytes, size_t limit) {
  if (offset + static_cast<size_t>(nbytes) <= limit) {
    uint8_t* dst = base + offset;
    const uintptr_t addr = reinterpret_cast<uintptr_t>(dst);
    if (nbytes == 4 && (addr & 3u) == 0) {
      *reinterpret_cast<uint32_t*>(dst) = word;
      return;
    }
    if (nbytes == 2 && (addr & 1u) == 0) {
      *reinterpret_cast<uint16_t*>(dst) = static_cast<uint16_t>(word);
      return;
    }
  }
  for (int j = 0; j < nbytes; ++j) {
    if (offset + static_cast<size_t>(j) < limit) base[offset + j] = static_cast<uint8_t>(word >> (8 * j));
  }
}

}  // namespace loco::cuda

// The first pass of the one-warp-per-block quantizers (quantize.cu,
// loco_compress.cu): the warp reads its quantization block once, stages each
// element in shared memory and finds the block's max |h|, the absmax its
// scale is made from. Device-only; included by the .cu files alone.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda_launch.cuh"
#include "kernels/quant_math.h"

namespace loco::cuda {

// Elements per lane per step of the block kernels: 4 consecutive floats (one
// float4 load), which pack into whole bytes of codes for every supported bit
// width (4 * bits / 8 bytes), so no two lanes share a byte.
constexpr int kLaneChunk = 4;
constexpr int kWarpChunkStep = kWarpSize * kLaneChunk;  // elements per warp per step

// Reads x[0, len) of one block, lane `lane` taking chunks of kLaneChunk
// elements (one float4 load when the chunk is whole and 16-byte aligned),
// and calls stage(i, x[i]) once for every i in [0, len): stage writes what
// the later passes need (shared memory, counters) and returns the value
// whose magnitude counts towards the absmax (0 for one that must not count,
// e.g. a non-finite element). Returns max |returned value| over the whole
// block (0 for an empty one), the same on every lane of the warp; every
// lane of the warp must call it.
template <typename Stage>
__device__ __forceinline__ float StageBlockAbsMax(const float* x, int len, int lane,
                                                  Stage&& stage) {
  float absmax = 0.0f;
  for (int i = lane * kLaneChunk; i < len; i += kWarpChunkStep) {
    float v[kLaneChunk];
    if (i + kLaneChunk <= len && Aligned16(x + i)) {
      const float4 q = *reinterpret_cast<const float4*>(x + i);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
      for (int k = 0; k < kLaneChunk; ++k) v[k] = i + k < len ? x[i + k] : 0.0f;
    }
    for (int k = 0; k < kLaneChunk && i + k < len; ++k) {
      absmax = qmath::MaxF(absmax, qmath::AbsF(stage(i + k, v[k])));
    }
  }
  return WarpMax(absmax);
}

}  // namespace loco::cuda

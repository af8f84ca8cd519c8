// CUDA block quantizer (kernels/quantize.h): one warp per quantization block.
//
// The warp stages its block in shared memory while it finds the absmax
// (kernels/block_absmax.cuh), so x is read from global memory once and the
// codes are written once. Each lane owns chunks of kLaneChunk = 4 consecutive
// elements, which pack into whole bytes for every supported bit width, so no
// two lanes share a byte.
#include <cuda_runtime.h>

#include <string>

#include "kernels/block_absmax.cuh"
#include "kernels/call_checks.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_launch.cuh"
#include "kernels/quant_math.h"
#include "kernels/quantize.h"

namespace loco::cuda {
namespace {

struct QuantizeArgs {
  const float* x;
  size_t n;
  int block_size;
  size_t num_blocks;
  int warps_per_cta;
  bool stochastic;
  uint64_t seed;
  uint64_t index_offset;
  uint8_t* codes;
  size_t packed_bytes;
  float* scales;
  unsigned long long* nonfinite;  // device counter, nullable
};

template <int kBits>
__global__ void QuantizeKernel(QuantizeArgs a) {
  extern __shared__ float staged[];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const size_t block = static_cast<size_t>(blockIdx.x) * a.warps_per_cta + warp;
  if (block >= a.num_blocks) return;  // whole warps exit together
  constexpr int qmax = (1 << (kBits - 1)) - 1;
  float* h = staged + static_cast<size_t>(warp) * a.block_size;
  const size_t start = block * static_cast<size_t>(a.block_size);
  const int len = static_cast<int>(min(static_cast<size_t>(a.block_size), a.n - start));
  const float* x = a.x + start;

  // A non-finite element is counted and quantized as 0.
  unsigned nonfinite = 0;
  const float absmax = StageBlockAbsMax(x, len, lane, [&](int i, float v) {
    if (!qmath::IsFinite(v)) {
      ++nonfinite;
      v = 0.0f;
    }
    h[i] = v;
    return v;
  });
  const float scale = qmath::BlockScale(absmax, qmax);
  const float inv = qmath::BlockInverse(absmax, qmax);
  if (lane == 0) a.scales[block] = scale;

  const size_t byte_base = start * kBits / 8;
  for (int i = lane * kLaneChunk; i < len; i += kWarpChunkStep) {
    uint32_t word = 0;
    for (int k = 0; k < kLaneChunk && i + k < len; ++k) {
      int code;
      if (a.stochastic) {
        const float u = qmath::StochasticUniform(a.seed, a.index_offset + start + i + k);
        code = qmath::StochasticCode(h[i + k], scale, inv, qmax, u);
      } else {
        code = qmath::NearestCode(h[i + k], scale, inv, qmax);
      }
      word |= qmath::CodeField(code, kBits) << (k * kBits);
    }
    StorePackedBytes(a.codes, byte_base + static_cast<size_t>(i) * kBits / 8, word,
                     kLaneChunk * kBits / 8, a.packed_bytes);
  }
  if (a.nonfinite != nullptr) {
    nonfinite = WarpSum(nonfinite);
    if (lane == 0 && nonfinite != 0) atomicAdd(a.nonfinite, static_cast<unsigned long long>(nonfinite));
  }
}

// One thread per 8 elements (bits bytes of codes), which never straddle a
// quantization block because block sizes are multiples of 32.
// kAdd: out += the decoded values (each rounded to fp32 before the add, as
// the CPU reference does; the build never contracts to FMA).
template <int kBits, bool kAdd>
__global__ void DequantizeKernel(const uint8_t* codes, const float* scales, size_t n,
                                 int block_size, float* out) {
  const size_t chunks = (n + 7) / 8;
  for (size_t c = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; c < chunks;
       c += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t first = c * 8;
    const float scale = scales[first / static_cast<size_t>(block_size)];
    const uint8_t* src = codes + c * kBits;  // 8 elements * kBits / 8 bytes
    const int count = static_cast<int>(min(static_cast<size_t>(8), n - first));
    float v[8];
    for (int k = 0; k < 8; ++k) {
      const int bit = k * kBits;
      const uint32_t field = k < count ? (src[bit / 8] >> (bit % 8)) & ((1u << kBits) - 1u) : 0u;
      v[k] = qmath::Decode(qmath::FieldCode(field, kBits), scale);
    }
    float* dst = out + first;
    if (count == 8 && Aligned16(dst)) {
      float4* d4 = reinterpret_cast<float4*>(dst);
      if (kAdd) {
        const float4 a = d4[0], b = d4[1];
        d4[0] = make_float4(__fadd_rn(a.x, v[0]), __fadd_rn(a.y, v[1]), __fadd_rn(a.z, v[2]),
                            __fadd_rn(a.w, v[3]));
        d4[1] = make_float4(__fadd_rn(b.x, v[4]), __fadd_rn(b.y, v[5]), __fadd_rn(b.z, v[6]),
                            __fadd_rn(b.w, v[7]));
      } else {
        d4[0] = make_float4(v[0], v[1], v[2], v[3]);
        d4[1] = make_float4(v[4], v[5], v[6], v[7]);
      }
    } else {
      for (int k = 0; k < count; ++k) dst[k] = kAdd ? __fadd_rn(dst[k], v[k]) : v[k];
    }
  }
}


}  // namespace

Status Quantize(const float* x, size_t n, const QuantizeParams& p, uint8_t* codes, float* scales,
                QuantizeStats* stats, void* stream) {
  LOCO_RETURN_IF_ERROR(ValidateQuantizeCall(x, n, p, codes, scales));
  LOCO_RETURN_IF_ERROR(RequireDevice());
  if (stats != nullptr) stats->nonfinite = 0;
  if (n == 0) return Status::Ok();

  cudaStream_t s = AsStream(stream);
  DeviceScratch counter(s);
  if (stats != nullptr) LOCO_RETURN_IF_ERROR(counter.AllocateZeroed(sizeof(unsigned long long)));

  QuantizeArgs a{};
  a.x = x;
  a.n = n;
  a.block_size = p.block_size;
  a.num_blocks = NumBlocks(n, p.block_size);
  a.stochastic = p.rounding == Rounding::kStochastic;
  a.seed = p.seed;
  a.index_offset = p.index_offset;
  a.codes = codes;
  a.packed_bytes = PackedBytes(n, p.bits);
  a.scales = scales;
  a.nonfinite = counter.as<unsigned long long>();
  const WarpPerBlockLaunch l = WarpPerBlockGeometry(a.num_blocks, p.block_size, 1);
  a.warps_per_cta = l.warps_per_cta;
  switch (p.bits) {
    case 2: QuantizeKernel<2><<<l.grid, l.threads, l.shared_bytes, s>>>(a); break;
    case 4: QuantizeKernel<4><<<l.grid, l.threads, l.shared_bytes, s>>>(a); break;
    default: QuantizeKernel<8><<<l.grid, l.threads, l.shared_bytes, s>>>(a); break;
  }
  LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  if (stats != nullptr) {
    unsigned long long count = 0;
    LOCO_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(&count, counter.get(), sizeof(count), cudaMemcpyDeviceToHost, s));
    LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    stats->nonfinite = count;
  }
  return Status::Ok();
}

namespace {

template <bool kAdd>
Status LaunchDequantize(const char* name, const uint8_t* codes, const float* scales, size_t n,
                        int bits, int block_size, float* out, void* stream) {
  LOCO_RETURN_IF_ERROR(ValidateQuantizeParams(bits, block_size));
  if (n > 0 && (codes == nullptr || scales == nullptr || out == nullptr)) {
    return InvalidArgument(std::string(name) + " of " + std::to_string(n) +
                           " elements needs non-null codes, scales and out");
  }
  LOCO_RETURN_IF_ERROR(RequireDevice());
  if (n == 0) return Status::Ok();
  cudaStream_t s = AsStream(stream);
  const unsigned grid = ElementwiseGrid((n + 7) / 8, kElementwiseThreads);
  switch (bits) {
    case 2: DequantizeKernel<2, kAdd><<<grid, kElementwiseThreads, 0, s>>>(codes, scales, n, block_size, out); break;
    case 4: DequantizeKernel<4, kAdd><<<grid, kElementwiseThreads, 0, s>>>(codes, scales, n, block_size, out); break;
    default: DequantizeKernel<8, kAdd><<<grid, kElementwiseThreads, 0, s>>>(codes, scales, n, block_size, out); break;
  }
  LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

Status Dequantize(const uint8_t* codes, const float* scales, size_t n, int bits, int block_size,
                  float* out, void* stream) {
  return LaunchDequantize<false>("Dequantize", codes, scales, n, bits, block_size, out, stream);
}

Status DequantizeAdd(const uint8_t* codes, const float* scales, size_t n, int bits,
                     int block_size, float* out, void* stream) {
  return LaunchDequantize<true>("DequantizeAdd", codes, scales, n, bits, block_size, out, stream);
}

}  // namespace loco::cuda

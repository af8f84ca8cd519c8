// CUDA LoCo compression (kernels/loco_compress.h), fused in one kernel with
// one warp per quantization block:
//   pass 1  read g and the stored error ê, stage h = g + ê and ê in shared
//           memory, find max|h|;
//   pass 2  quantize h to the payload codes, form the new error e, stage it,
//           find max|e|;
//   pass 3  store e (int8 codes + block scale, or fp32 values).
// So g, the payload and the error state each cross global memory once.
// The element arithmetic is kernels/quant_math.h, shared with the host, so
// codes and scales match cpu::LocoCompress bit for bit.
#include <cuda_runtime.h>

#include <string>

#include "kernels/block_absmax.cuh"
#include "kernels/call_checks.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_launch.cuh"
#include "kernels/loco_compress.h"
#include "kernels/quant_math.h"

namespace loco::cuda {
namespace {

constexpr int kErrorQmax = 127;

struct LocoArgs {
  const float* g;
  size_t n;
  int block_size;
  size_t num_blocks;
  int warps_per_cta;
  CompensationMode mode;
  int error_bits;
  float beta;
  float one_minus_beta;
  bool reset;  // this step ends a reset period: the stored error becomes 0
  bool stochastic;
  uint64_t seed;
  uint64_t index_offset;
  ErrorStateView state;
  uint8_t* codes;
  size_t packed_bytes;
  float* scales;
  unsigned long long* nonfinite;  // device, nullable
  double* error_sq_norm;          // device, nullable
};

template <int kBits>
__global__ void LocoCompressKernel(LocoArgs a) {
  extern __shared__ float staged[];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const size_t block = static_cast<size_t>(blockIdx.x) * a.warps_per_cta + warp;
  if (block >= a.num_blocks) return;  // whole warps exit together
  constexpr int qmax = (1 << (kBits - 1)) - 1;
  // h[] holds h in passes 1-2 and the new error e from pass 2 on; old[] holds
  // ê, or NaN for an element whose g or h was not finite (its e is 0).
  float* h = staged + static_cast<size_t>(warp) * 2 * a.block_size;
  float* old = h + a.block_size;
  const size_t start = block * static_cast<size_t>(a.block_size);
  const int len = static_cast<int>(min(static_cast<size_t>(a.block_size), a.n - start));
  const float* g = a.g + start;
  const bool compensate = a.mode != CompensationMode::kNaive;
  const bool error8 = a.error_bits == 8;
  const float old_scale = compensate && error8 ? a.state.scales[block] : 0.0f;

  // Pass 1. An element whose g or h is not finite is counted, quantized as 0
  // and left out of the absmax.
  unsigned nonfinite = 0;
  const float absmax = StageBlockAbsMax(g, len, lane, [&](int i, float gi) {
    float ehat = 0.0f;
    if (compensate) {
      ehat = error8 ? qmath::Decode(a.state.codes[start + i], old_scale)
                    : a.state.values[start + i];
    }
    const float hi = compensate ? qmath::Add(gi, ehat) : gi;
    if (!qmath::IsFinite(gi) || !qmath::IsFinite(hi)) {
      ++nonfinite;
      h[i] = 0.0f;
      old[i] = __int_as_float(0x7FC00000);
      return 0.0f;
    }
    h[i] = hi;
    old[i] = ehat;
    return hi;
  });
  // Every lane has read its ê (and old_scale) before any lane rewrites the state.
  __syncwarp();
  const float scale = qmath::BlockScale(absmax, qmax);
  const float inv = qmath::BlockInverse(absmax, qmax);
  if (lane == 0) a.scales[block] = scale;

  // Pass 2.
  const bool track_error = compensate && !a.reset;
  double sq = 0.0;
  float error_absmax = 0.0f;
  const size_t byte_base = start * kBits / 8;
  for (int i = lane * kLaneChunk; i < len; i += kWarpChunkStep) {
    uint32_t word = 0;
    for (int k = 0; k < kLaneChunk && i + k < len; ++k) {
      const float hk = h[i + k];
      int code;
      if (a.stochastic) {
        const float u = qmath::StochasticUniform(a.seed, a.index_offset + start + i + k);
        code = qmath::StochasticCode(hk, scale, inv, qmax, u);
      } else {
        code = qmath::NearestCode(hk, scale, inv, qmax);
      }
      word |= qmath::CodeField(code, kBits) << (k * kBits);
      if (!track_error) continue;
      const float ehat = old[i + k];
      float e = 0.0f;
      if (qmath::IsFinite(ehat)) {
        const float r = qmath::Sub(hk, qmath::Decode(code, scale));
        e = a.mode == CompensationMode::kLoco
                ? qmath::Add(qmath::Mul(a.beta, ehat), qmath::Mul(a.one_minus_beta, r))
                : r;
        // Only when hhat overflows (|h| within an ulp of FLT_MAX): keep the state finite.
        if (!qmath::IsFinite(e)) e = 0.0f;
      }
      if (error8) {
        h[i + k] = e;
        error_absmax = qmath::MaxF(error_absmax, qmath::AbsF(e));
      } else {
        a.state.values[start + i + k] = e;
        sq += static_cast<double>(e) * static_cast<double>(e);
      }
    }
    StorePackedBytes(a.codes, byte_base + static_cast<size_t>(i) * kBits / 8, word,
                     kLaneChunk * kBits / 8, a.packed_bytes);
  }

  __syncwarp();
  // Pass 3: the stored error.
  if (compensate && a.reset) {
    for (int i = lane; i < len; i += kWarpSize) {
      if (error8) {
        a.state.codes[start + i] = 0;
      } else {
        a.state.values[start + i] = 0.0f;
      }
    }
    if (error8 && lane == 0) a.state.scales[block] = 0.0f;
  } else if (track_error && error8) {
    error_absmax = WarpMax(error_absmax);
    const float error_scale = qmath::BlockScale(error_absmax, kErrorQmax);
    const float error_inv = qmath::BlockInverse(error_absmax, kErrorQmax);
    if (lane == 0) a.state.scales[block] = error_scale;
    int code_sq = 0;  // Σ code^2 <= 4096 * 127^2: exact in int
    for (int i = lane * kLaneChunk; i < len; i += kWarpChunkStep) {
      uint32_t word = 0;
      for (int k = 0; k < kLaneChunk && i + k < len; ++k) {
        const int code = qmath::NearestCode(h[i + k], error_scale, error_inv, kErrorQmax);
        code_sq += code * code;
        word |= qmath::CodeField(code, 8) << (8 * k);
      }
      StorePackedBytes(reinterpret_cast<uint8_t*>(a.state.codes), start + i, word,
                       kLaneChunk, a.n);
    }
    // Σ ê'^2 of the block as scale^2 * Σ code^2, exactly as the CPU forms it,
    // so only the order in which blocks are summed differs.
    code_sq = WarpSum(code_sq);
    sq = lane == 0 ? static_cast<double>(error_scale) * static_cast<double>(error_scale) *
                         static_cast<double>(code_sq)
                   : 0.0;
  }

  if (a.nonfinite != nullptr) {
    nonfinite = WarpSum(nonfinite);
    if (lane == 0 && nonfinite != 0) atomicAdd(a.nonfinite, static_cast<unsigned long long>(nonfinite));
  }
  if (a.error_sq_norm != nullptr && track_error) {
    sq = WarpSum(sq);
    if (lane == 0 && sq != 0.0) atomicAdd(a.error_sq_norm, sq);
  }
}


}  // namespace

Status LocoCompress(const float* g, size_t n, int64_t step, const LocoParams& p,
                    ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats,
                    void* stream) {
  LOCO_RETURN_IF_ERROR(ValidateLocoCall(g, n, step, p, state, codes, scales));
  LOCO_RETURN_IF_ERROR(RequireDevice());
  if (stats != nullptr) *stats = LocoStats{};
  if (n == 0) return Status::Ok();

  cudaStream_t s = AsStream(stream);
  struct Totals {
    unsigned long long nonfinite;
    double error_sq_norm;
  };
  DeviceScratch totals(s);
  if (stats != nullptr) LOCO_RETURN_IF_ERROR(totals.AllocateZeroed(sizeof(Totals)));

  LocoArgs a{};
  a.g = g;
  a.n = n;
  a.block_size = p.block_size;
  a.num_blocks = NumBlocks(n, p.block_size);
  a.mode = p.mode;
  a.error_bits = p.error_bits;
  a.beta = p.mode == CompensationMode::kLoco ? p.beta : 0.0f;
  a.one_minus_beta = 1.0f - a.beta;
  a.reset = p.mode == CompensationMode::kLoco && p.reset_period > 0 && (step + 1) % p.reset_period == 0;
  a.stochastic = p.rounding == Rounding::kStochastic;
  a.seed = p.seed;
  a.index_offset = p.index_offset;
  a.state = state;
  a.codes = codes;
  a.packed_bytes = PackedBytes(n, p.bits);
  a.scales = scales;
  if (stats != nullptr) {
    a.nonfinite = &totals.as<Totals>()->nonfinite;
    a.error_sq_norm = &totals.as<Totals>()->error_sq_norm;
  }
  const WarpPerBlockLaunch l = WarpPerBlockGeometry(a.num_blocks, p.block_size, 2);
  a.warps_per_cta = l.warps_per_cta;
  switch (p.bits) {
    case 2: LocoCompressKernel<2><<<l.grid, l.threads, l.shared_bytes, s>>>(a); break;
    case 4: LocoCompressKernel<4><<<l.grid, l.threads, l.shared_bytes, s>>>(a); break;
    default: LocoCompressKernel<8><<<l.grid, l.threads, l.shared_bytes, s>>>(a); break;
  }
  LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  if (stats != nullptr) {
    Totals host{};
    LOCO_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(&host, totals.get(), sizeof(host), cudaMemcpyDeviceToHost, s));
    LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    stats->nonfinite = host.nonfinite;
    stats->error_sq_norm = host.error_sq_norm;
  }
  return Status::Ok();
}

}  // namespace loco::cuda

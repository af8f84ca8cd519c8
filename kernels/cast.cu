// CUDA fp32 <-> bf16 casts (kernels/cast.h), bit-identical to the CPU casts:
// both use qmath::Fp32ToBf16 / Bf16ToFp32.
#include <cuda_runtime.h>

#include "kernels/cast.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_launch.cuh"
#include "kernels/quant_math.h"

namespace loco::cuda {
namespace {

__global__ void Fp32ToBf16Kernel(const float* in, size_t n, uint16_t* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = qmath::Fp32ToBf16(in[i]);
  }
}

__global__ void Bf16ToFp32Kernel(const uint16_t* in, size_t n, float* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = qmath::Bf16ToFp32(in[i]);
  }
}

Status CheckPointers(const void* in, size_t n, const void* out) {
  if (n > 0 && (in == nullptr || out == nullptr)) {
    return InvalidArgument("cast: in and out must be non-null device pointers when n > 0");
  }
  return Status::Ok();
}

}  // namespace

Status CastFp32ToBf16(const float* in, size_t n, uint16_t* out, void* stream) {
  LOCO_RETURN_IF_ERROR(CheckPointers(in, n, out));
  LOCO_RETURN_IF_ERROR(RequireDevice());
  if (n == 0) return Status::Ok();
  Fp32ToBf16Kernel<<<ElementwiseGrid(n, kElementwiseThreads), kElementwiseThreads, 0, AsStream(stream)>>>(in, n, out);
  LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

Status CastBf16ToFp32(const uint16_t* in, size_t n, float* out, void* stream) {
  LOCO_RETURN_IF_ERROR(CheckPointers(in, n, out));
  LOCO_RETURN_IF_ERROR(RequireDevice());
  if (n == 0) return Status::Ok();
  Bf16ToFp32Kernel<<<ElementwiseGrid(n, kElementwiseThreads), kElementwiseThreads, 0, AsStream(stream)>>>(in, n, out);
  LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

}  // namespace loco::cuda

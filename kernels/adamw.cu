// CUDA AdamW and squared norm (kernels/adamw.h).
//
// The bias-corrected step size and sqrt(1 - β2^t) are computed on the host in
// double and passed as floats, exactly as cpu::AdamW does; every per-element
// step is one explicitly rounded fp32 operation in the same (PyTorch's) order,
// so the results normally match the CPU bit for bit. The parity test holds
// them to a stated tolerance rather than bit equality (the contract in
// kernels/adamw.h promises no more).
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/adamw.h"
#include "kernels/call_checks.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_launch.cuh"
#include "kernels/quant_math.h"

namespace loco::cuda {
namespace {

struct AdamWArgs {
  float beta1;
  float beta2;
  float one_minus_beta1;
  float one_minus_beta2;
  float eps;
  float decay;       // 1 - lr * weight_decay (fp32)
  float step_size;   // lr / (1 - beta1^t), in double, rounded once
  float bc2_sqrt;    // sqrt(1 - beta2^t), in double, rounded once
  float grad_scale;
};

// Per element, the order of cpu::AdamW (kernels/adamw_cpu.cc):
//   p = p*decay; g = g*grad_scale; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*(g*g);
//   p = p - step_size * (m / (sqrt(v)/bc2_sqrt + eps))
__global__ void AdamWKernel(float* params, float* m, float* v, const float* grad, size_t n, AdamWArgs a) {
  using namespace qmath;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float pd = Mul(params[i], a.decay);
    const float g = Mul(grad[i], a.grad_scale);
    const float mi = Add(Mul(a.beta1, m[i]), Mul(a.one_minus_beta1, g));
    const float vi = Add(Mul(a.beta2, v[i]), Mul(a.one_minus_beta2, Mul(g, g)));
    const float denom = Add(Div(__fsqrt_rn(vi), a.bc2_sqrt), a.eps);
    params[i] = Sub(pd, Mul(a.step_size, Div(mi, denom)));
    m[i] = mi;
    v[i] = vi;
  }
}

constexpr int kNormThreads = 256;

__global__ void SquaredNormKernel(const float* x, size_t n, double* out) {
  __shared__ double warp_sums[kNormThreads / kWarpSize];
  double sum = 0.0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const double xi = x[i];
    sum += xi * xi;
  }
  sum = WarpSum(sum);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  if (threadIdx.x % kWarpSize == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    sum = threadIdx.x < blockDim.x / kWarpSize ? warp_sums[threadIdx.x] : 0.0;
    sum = WarpSum(sum);
    if (threadIdx.x == 0) atomicAdd(out, sum);
  }
}

}  // namespace

Status AdamW(float* params, float* m, float* v, const float* grad, size_t n, int64_t step,
             const AdamWParams& p, float grad_scale, void* stream) {
  StatusOr<ValidatedAdamWParams> valid = ValidatedAdamWParams::Validate(p);
  if (!valid.ok()) return valid.status();
  return AdamW(params, m, v, grad, n, step, valid.value(), grad_scale, stream);
}

Status AdamW(float* params, float* m, float* v, const float* grad, size_t n, int64_t step,
             const ValidatedAdamWParams& valid, float grad_scale, void* stream) {
  LOCO_RETURN_IF_ERROR(ValidateAdamWCall(params, m, v, grad, n, step, grad_scale));
  const AdamWParams& p = valid.get();
  LOCO_RETURN_IF_ERROR(RequireDevice());
  if (n == 0) return Status::Ok();
  const double t = static_cast<double>(step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), t);
  AdamWArgs a{};
  a.beta1 = p.beta1;
  a.beta2 = p.beta2;
  a.one_minus_beta1 = 1.0f - p.beta1;
  a.one_minus_beta2 = 1.0f - p.beta2;
  a.eps = p.eps;
  a.decay = 1.0f - p.lr * p.weight_decay;
  a.step_size = static_cast<float>(static_cast<double>(p.lr) / bc1);
  a.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  a.grad_scale = grad_scale;
  cudaStream_t s = AsStream(stream);
  AdamWKernel<<<ElementwiseGrid(n, kElementwiseThreads), kElementwiseThreads, 0, s>>>(params, m, v, grad, n, a);
  LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

Status SquaredNorm(const float* x, size_t n, double* out, void* stream) {
  if (out == nullptr) return InvalidArgument("squared norm: out must be a non-null host pointer");
  if (n > 0 && x == nullptr) return InvalidArgument("squared norm: x must be a non-null device pointer when n > 0");
  LOCO_RETURN_IF_ERROR(RequireDevice());
  *out = 0.0;
  if (n == 0) return Status::Ok();
  cudaStream_t s = AsStream(stream);
  DeviceScratch sum(s);
  LOCO_RETURN_IF_ERROR(sum.AllocateZeroed(sizeof(double)));
  // A grid of a few blocks per SM is enough for a bandwidth-bound reduction
  // and keeps the number of double atomics small.
  SquaredNormKernel<<<ElementwiseGrid(n, kNormThreads * 16), kNormThreads, 0, s>>>(x, n, sum.as<double>());
  LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  double host = 0.0;
  LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&host, sum.get(), sizeof(host), cudaMemcpyDeviceToHost, s));
  LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  *out = host;
  return Status::Ok();
}

}  // namespace loco::cuda

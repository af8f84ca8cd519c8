// CPU reference of AdamW (contract: kernels/adamw.h) and the squared norm
// used for global-norm clipping.
//
// Arithmetic (fp32 per element, no FMA; the CUDA kernel mirrors the order, and
// its results are compared within a tolerance, not bit for bit):
//   host, in double, then rounded to fp32 once per call:
//     step_size = lr / (1 - beta1^t),  bc2_sqrt = sqrt(1 - beta2^t)
//   host, in fp32: decay = 1 - lr*wd,  omb1 = 1 - beta1,  omb2 = 1 - beta2
//   per element:
//     p  = p * decay
//     g' = g * grad_scale
//     m  = beta1*m + omb1*g'
//     v  = beta2*v + omb2*(g'*g')
//     p  = p - step_size * (m / (sqrt(v) / bc2_sqrt + eps))
// which is PyTorch's single-tensor AdamW ordering (addcdiv with
// denom = sqrt(v)/sqrt(bc2) + eps).
#include <cmath>

#include "kernels/adamw.h"
#include "kernels/call_checks.h"
#include "kernels/cpu_clones.h"

namespace loco::cpu {
namespace {

LOCO_CPU_CLONES void AdamWLoop(float* params, float* m, float* v, const float* grad, size_t n,
                               float beta1, float beta2, float omb1, float omb2, float eps,
                               float step_size, float bc2_sqrt, float decay, float grad_scale) {
  for (size_t i = 0; i < n; ++i) {
    const float pd = params[i] * decay;
    const float g = grad[i] * grad_scale;
    const float mi = beta1 * m[i] + omb1 * g;
    const float vi = beta2 * v[i] + omb2 * (g * g);
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    params[i] = pd - step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

Status AdamW(float* params, float* m, float* v, const float* grad, size_t n, int64_t step,
             const AdamWParams& p, float grad_scale) {
  StatusOr<ValidatedAdamWParams> valid = ValidatedAdamWParams::Validate(p);
  if (!valid.ok()) return valid.status();
  return AdamW(params, m, v, grad, n, step, valid.value(), grad_scale);
}

Status AdamW(float* params, float* m, float* v, const float* grad, size_t n, int64_t step,
             const ValidatedAdamWParams& valid, float grad_scale) {
  LOCO_RETURN_IF_ERROR(ValidateAdamWCall(params, m, v, grad, n, step, grad_scale));
  const AdamWParams& p = valid.get();
  const double t = static_cast<double>(step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), t);
  const float step_size = static_cast<float>(static_cast<double>(p.lr) / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = 1.0f - p.lr * p.weight_decay;
  AdamWLoop(params, m, v, grad, n, p.beta1, p.beta2, 1.0f - p.beta1, 1.0f - p.beta2, p.eps,
            step_size, bc2_sqrt, decay, grad_scale);
  return Status::Ok();
}

namespace {

LOCO_CPU_CLONES void AddSquaredNormLanesLoop(const float* x, size_t n, double lanes[8]) {
  // Eight partial sums in a fixed order: deterministic, and no serial chain of
  // dependent double adds (which would bound the speed at one add per latency).
  double acc[8];
  for (size_t j = 0; j < 8; ++j) acc[j] = lanes[j];
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t j = 0; j < 8; ++j) {
      const double d = x[i + j];
      acc[j] += d * d;
    }
  }
  for (; i < n; ++i) acc[i % 8] += static_cast<double>(x[i]) * x[i];
  for (size_t j = 0; j < 8; ++j) lanes[j] = acc[j];
}

}  // namespace

void AddSquaredNormLanes(const float* x, size_t n, double lanes[8]) {
  AddSquaredNormLanesLoop(x, n, lanes);
}

double CombineSquaredNormLanes(const double lanes[8]) {
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

double SquaredNorm(const float* x, size_t n) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  AddSquaredNormLanes(x, n, lanes);
  return CombineSquaredNormLanes(lanes);
}

}  // namespace loco::cpu

// AdamW (decoupled weight decay, bias-corrected), PyTorch's ordering:
//   p ← p · (1 − lr·wd)
//   m ← β1·m + (1 − β1)·g'          with g' = g · grad_scale
//   v ← β2·v + (1 − β2)·g'^2
//   p ← p − lr · (m / (1 − β1^t)) / (sqrt(v / (1 − β2^t)) + eps)
// `step` t is 1-based. grad_scale implements clipping by a global norm:
// ClipScale(global_norm, max_norm) = min(1, max_norm / (global_norm + 1e-6)), or 1
// when max_norm <= 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace loco {

struct AdamWParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  float max_grad_norm = 0.0f;  // 0 = no clipping
};

Status ValidateAdamWParams(const AdamWParams& p);
float ClipScale(double global_norm, float max_norm);

// AdamWParams that passed ValidateAdamWParams; only Validate makes one. The
// hyper-parameters are checked where they enter (a server's options at
// start-up, a ShardStore's step) and a function that takes this type does
// not check them again: a step split into many pieces validates once, not
// once per piece. A plain value, copyable.
class ValidatedAdamWParams {
 public:
  static StatusOr<ValidatedAdamWParams> Validate(const AdamWParams& p);
  const AdamWParams& get() const { return params_; }

 private:
  explicit ValidatedAdamWParams(const AdamWParams& p) : params_(p) {}
  AdamWParams params_;
};

// The AdamW entry points come in two forms. The AdamWParams form validates
// the hyper-parameters (ValidateAdamWParams), then does what the
// ValidatedAdamWParams form does: check the call itself (step >= 1,
// grad_scale finite and >= 0, non-null buffers when n > 0), then step.
// Both refuse with InvalidArgument, before anything is written; cpu:: and
// cuda:: refuse the same calls with the same messages.
namespace cpu {

Status AdamW(float* params, float* m, float* v, const float* grad, size_t n, int64_t step,
             const AdamWParams& p, float grad_scale);
Status AdamW(float* params, float* m, float* v, const float* grad, size_t n, int64_t step,
             const ValidatedAdamWParams& p, float grad_scale);
// Σ x_i^2, accumulated in double.
double SquaredNorm(const float* x, size_t n);

// SquaredNorm in pieces, for a caller that never holds the whole vector:
// AddSquaredNormLanes adds x_i^2 (in double) into lanes[i % 8] of the fixed
// eight; CombineSquaredNormLanes sums the lanes in SquaredNorm's order. When
// every piece but the last has a length that is a multiple of 8, the result
// equals SquaredNorm of the concatenation bit for bit.
void AddSquaredNormLanes(const float* x, size_t n, double lanes[8]);
double CombineSquaredNormLanes(const double lanes[8]);

}  // namespace cpu

namespace cuda {

Status AdamW(float* params, float* m, float* v, const float* grad, size_t n, int64_t step,
             const AdamWParams& p, float grad_scale, void* stream);
Status AdamW(float* params, float* m, float* v, const float* grad, size_t n, int64_t step,
             const ValidatedAdamWParams& p, float grad_scale, void* stream);
// Result in *out (host); synchronises the stream.
Status SquaredNorm(const float* x, size_t n, double* out, void* stream);

}  // namespace cuda
}  // namespace loco

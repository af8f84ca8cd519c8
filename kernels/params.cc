// Parameter validation shared by the CPU and CUDA entry points, and the
// clipping factor. Messages say what is wrong and what would be right.
#include <cmath>
#include <cstdio>
#include <string>

#include "kernels/adamw.h"
#include "kernels/call_checks.h"
#include "kernels/loco_compress.h"
#include "kernels/quantize.h"

namespace loco {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

}  // namespace

Status ValidateQuantizeParams(int bits, int block_size) {
  if (bits != 2 && bits != 4 && bits != 8) {
    return InvalidArgument("bits " + std::to_string(bits) + " is not supported (use 2, 4 or 8)");
  }
  if (block_size < 32 || block_size > 4096 || block_size % 32 != 0) {
    return InvalidArgument("block_size " + std::to_string(block_size) +
                           " is not a multiple of 32 in [32, 4096]");
  }
  return Status::Ok();
}

Status ValidateLocoParams(const LocoParams& p) {
  switch (p.mode) {
    case CompensationMode::kNaive:
    case CompensationMode::kEf:
    case CompensationMode::kLoco:
      break;
    default:
      return InvalidArgument("compensation mode " + std::to_string(static_cast<int>(p.mode)) +
                             " is unknown (use naive, ef or loco)");
  }
  LOCO_RETURN_IF_ERROR(ValidateQuantizeParams(p.bits, p.block_size));
  if (p.rounding != Rounding::kNearest && p.rounding != Rounding::kStochastic) {
    return InvalidArgument("rounding " + std::to_string(static_cast<int>(p.rounding)) +
                           " is unknown (use nearest or stochastic)");
  }
  if (p.index_offset % static_cast<uint64_t>(p.block_size) != 0) {
    return InvalidArgument("index_offset " + std::to_string(p.index_offset) +
                           " is not a multiple of block_size " + std::to_string(p.block_size));
  }
  // beta and reset_period only mean something for kLoco; other modes ignore them.
  if (p.mode == CompensationMode::kLoco) {
    if (!(p.beta >= 0.0f && p.beta <= 1.0f)) {
      return InvalidArgument("beta " + Num(p.beta) + " is not in [0, 1]");
    }
    if (p.reset_period < 0) {
      return InvalidArgument("reset_period " + std::to_string(p.reset_period) +
                             " is negative (use 0 for never, or a period >= 1)");
    }
  }
  if (p.mode != CompensationMode::kNaive && p.error_bits != 8 && p.error_bits != 32) {
    return InvalidArgument("error_bits " + std::to_string(p.error_bits) +
                           " is not supported (use 8 or 32)");
  }
  return Status::Ok();
}

Status ValidateAdamWParams(const AdamWParams& p) {
  if (!(std::isfinite(p.lr) && p.lr >= 0.0f)) {
    return InvalidArgument("lr " + Num(p.lr) + " is not a finite value >= 0");
  }
  if (!(p.beta1 >= 0.0f && p.beta1 < 1.0f)) {
    return InvalidArgument("beta1 " + Num(p.beta1) + " is not in [0, 1)");
  }
  if (!(p.beta2 >= 0.0f && p.beta2 < 1.0f)) {
    return InvalidArgument("beta2 " + Num(p.beta2) + " is not in [0, 1)");
  }
  if (!(std::isfinite(p.eps) && p.eps > 0.0f)) {
    return InvalidArgument("eps " + Num(p.eps) + " is not a finite value > 0");
  }
  if (!(std::isfinite(p.weight_decay) && p.weight_decay >= 0.0f)) {
    return InvalidArgument("weight_decay " + Num(p.weight_decay) + " is not a finite value >= 0");
  }
  if (!(p.lr * p.weight_decay <= 1.0f)) {
    return InvalidArgument("lr * weight_decay = " + Num(double{p.lr} * p.weight_decay) +
                           " exceeds 1 (the decay factor 1 - lr*wd would flip the parameters' sign)");
  }
  if (!(std::isfinite(p.max_grad_norm) && p.max_grad_norm >= 0.0f)) {
    return InvalidArgument("max_grad_norm " + Num(p.max_grad_norm) +
                           " is not a finite value >= 0 (0 disables clipping)");
  }
  return Status::Ok();
}

StatusOr<ValidatedAdamWParams> ValidatedAdamWParams::Validate(const AdamWParams& p) {
  LOCO_RETURN_IF_ERROR(ValidateAdamWParams(p));
  return ValidatedAdamWParams(p);
}

// min(1, max_norm / (global_norm + 1e-6)) in double, then rounded to fp32; 1
// when clipping is off. A NaN or negative norm gives 0 and an infinite one
// gives 0 by the formula: no finite factor makes such a gradient safe, and
// callers are expected to have rejected it before computing the norm.
float ClipScale(double global_norm, float max_norm) {
  if (!(max_norm > 0.0f)) return 1.0f;
  if (!(global_norm >= 0.0)) return 0.0f;
  const double s = static_cast<double>(max_norm) / (global_norm + 1e-6);
  return s < 1.0 ? static_cast<float>(s) : 1.0f;
}

// Shared by cpu:: and cuda:: so that both refuse the same calls with the
// same messages (kernels/call_checks.h).
Status ValidateQuantizeCall(const float* x, size_t n, const QuantizeParams& p,
                            const uint8_t* codes, const float* scales) {
  LOCO_RETURN_IF_ERROR(ValidateQuantizeParams(p.bits, p.block_size));
  if (p.rounding != Rounding::kNearest && p.rounding != Rounding::kStochastic) {
    return InvalidArgument("rounding " + std::to_string(static_cast<int>(p.rounding)) +
                           " is unknown (use nearest or stochastic)");
  }
  if (p.index_offset % static_cast<uint64_t>(p.block_size) != 0) {
    return InvalidArgument("index_offset " + std::to_string(p.index_offset) +
                           " is not a multiple of block_size " + std::to_string(p.block_size));
  }
  if (n > 0 && (x == nullptr || codes == nullptr || scales == nullptr)) {
    return InvalidArgument("Quantize of " + std::to_string(n) +
                           " elements needs non-null x, codes and scales");
  }
  return Status::Ok();
}

Status ValidateAdamWCall(const float* params, const float* m, const float* v, const float* grad,
                         size_t n, int64_t step, float grad_scale) {
  if (step < 1) {
    return InvalidArgument("AdamW step " + std::to_string(step) +
                           " is not >= 1 (steps are 1-based)");
  }
  if (!(std::isfinite(grad_scale) && grad_scale >= 0.0f)) {
    return InvalidArgument("grad_scale " + std::to_string(grad_scale) +
                           " is not a finite value >= 0 (use ClipScale, or 1 for no clipping)");
  }
  if (n > 0 && (params == nullptr || m == nullptr || v == nullptr || grad == nullptr)) {
    return InvalidArgument("AdamW of " + std::to_string(n) +
                           " elements needs non-null params, m, v and grad");
  }
  return Status::Ok();
}

Status ValidateLocoCall(const float* g, size_t n, int64_t step, const LocoParams& p,
                        const ErrorStateView& state, const uint8_t* codes, const float* scales) {
  LOCO_RETURN_IF_ERROR(ValidateLocoParams(p));
  if (step < 0) {
    return InvalidArgument("step " + std::to_string(step) + " is negative (steps are 0-based)");
  }
  if (n == 0) return Status::Ok();
  if (g == nullptr || codes == nullptr || scales == nullptr) {
    return InvalidArgument("LocoCompress of " + std::to_string(n) +
                           " elements needs non-null g, codes and scales");
  }
  if (p.mode != CompensationMode::kNaive) {
    if (p.error_bits == 8 && (state.codes == nullptr || state.scales == nullptr)) {
      return InvalidArgument(
          "error state with error_bits 8 needs non-null codes and scales (ErrorState(n, block, 8))");
    }
    if (p.error_bits == 32 && state.values == nullptr) {
      return InvalidArgument(
          "error state with error_bits 32 needs non-null values (ErrorState(n, block, 32))");
    }
  }
  return Status::Ok();
}

}  // namespace loco

#include "server/shard_store.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace loco {

Status ShardStore::Initialize(ShardRange range, std::vector<float> values, uint64_t version) {
  if (initialized_) return FailedPrecondition("shard already initialised");
  if (values.size() != range.length) {
    return InvalidArgument("expected " + std::to_string(range.length) + " values, got " +
                           std::to_string(values.size()));
  }
  range_ = range;
  params_ = std::move(values);
  m_.clear();
  v_.clear();
  version_ = version;
  initialized_ = true;
  return Status::Ok();
}

Status ShardStore::Restore(ShardRange range, uint64_t version, std::vector<float> params,
                           std::vector<float> m, std::vector<float> v) {
  if (initialized_) return FailedPrecondition("shard already initialised");
  const bool zero_moments = m.empty() && v.empty();
  if (params.size() != range.length ||
      (!zero_moments && (m.size() != range.length || v.size() != range.length))) {
    return InvalidArgument("restoring " + std::to_string(range.length) + " values: got " +
                           std::to_string(params.size()) + " params, " +
                           std::to_string(m.size()) + " m, " + std::to_string(v.size()) + " v");
  }
  range_ = range;
  params_ = std::move(params);
  m_ = std::move(m);
  v_ = std::move(v);
  version_ = version;
  initialized_ = true;
  return Status::Ok();
}

Status ShardStore::AllocateMoments() {
  if (!initialized_) return FailedPrecondition("shard not initialised");
  if (m_.size() != params_.size()) {
    m_.assign(params_.size(), 0.0f);
    v_.assign(params_.size(), 0.0f);
  }
  return Status::Ok();
}

Status ShardStore::FastForward(uint64_t version) {
  if (!initialized_) return FailedPrecondition("shard not initialised");
  if (version < version_) {
    return FailedPrecondition("cannot move version " + std::to_string(version_) + " back to " +
                              std::to_string(version));
  }
  version_ = version;
  return Status::Ok();
}

Status ShardStore::Apply(const std::vector<float>& grad, const AdamWParams& hyper,
                         ApplyStats* stats) {
  if (initialized_ && grad.size() != params_.size()) {
    return InvalidArgument("gradient has " + std::to_string(grad.size()) + " values, shard " +
                           std::to_string(params_.size()));
  }
  return Apply([&grad](size_t begin, size_t, float*) { return grad.data() + begin; }, hyper,
               stats);
}

Status ShardStore::Apply(const GradientPieces& grad, const AdamWParams& hyper,
                         ApplyStats* stats) {
  if (!initialized_) return FailedPrecondition("shard not initialised");
  LOCO_RETURN_IF_ERROR(ValidateAdamWParams(hyper));
  const size_t n = params_.size();
  // Pieces are multiples of 8 long (but the last), so the lanes carried from
  // piece to piece give SquaredNorm of the whole vector exactly.
  static_assert(kApplyPiece % 8 == 0);
  std::vector<float> scratch(std::min(n, kApplyPiece));
  LOCO_RETURN_IF_ERROR(AllocateMoments());
  const int64_t t = static_cast<int64_t>(version_ + 1);
  ApplyStats local;
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  // Without clipping the norm is only reported, so one pass computes it and
  // applies AdamW; with clipping the scale must be known first.
  const bool clipping = hyper.max_grad_norm > 0.0f;
  if (clipping) {
    for (size_t begin = 0; begin < n; begin += kApplyPiece) {
      const size_t count = std::min(kApplyPiece, n - begin);
      cpu::AddSquaredNormLanes(grad(begin, count, scratch.data()), count, lanes);
    }
    local.grad_norm = std::sqrt(cpu::CombineSquaredNormLanes(lanes));
    local.grad_scale = ClipScale(local.grad_norm, hyper.max_grad_norm);
  }
  for (size_t begin = 0; begin < n; begin += kApplyPiece) {
    const size_t count = std::min(kApplyPiece, n - begin);
    const float* g = grad(begin, count, scratch.data());
    if (!clipping) cpu::AddSquaredNormLanes(g, count, lanes);
    // Cannot fail: the hyper-parameters, the step and the scale are valid and
    // the pointers are not null (count > 0).
    LOCO_RETURN_IF_ERROR(cpu::AdamW(params_.data() + begin, m_.data() + begin,
                                    v_.data() + begin, g, count, t, hyper, local.grad_scale));
  }
  if (!clipping) local.grad_norm = std::sqrt(cpu::CombineSquaredNormLanes(lanes));
  ++version_;
  if (stats != nullptr) *stats = local;
  return Status::Ok();
}

}  // namespace loco

#include "server/shard_store.h"

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
  m_.assign(params_.size(), 0.0f);
  v_.assign(params_.size(), 0.0f);
  version_ = version;
  initialized_ = true;
  return Status::Ok();
}

Status ShardStore::Restore(ShardRange range, uint64_t version, std::vector<float> params,
                           std::vector<float> m, std::vector<float> v) {
  if (initialized_) return FailedPrecondition("shard already initialised");
  if (params.size() != range.length || m.size() != range.length || v.size() != range.length) {
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
  if (!initialized_) return FailedPrecondition("shard not initialised");
  if (grad.size() != params_.size()) {
    return InvalidArgument("gradient has " + std::to_string(grad.size()) + " values, shard " +
                           std::to_string(params_.size()));
  }
  LOCO_RETURN_IF_ERROR(ValidateAdamWParams(hyper));
  ApplyStats local;
  local.grad_norm = std::sqrt(cpu::SquaredNorm(grad.data(), grad.size()));
  local.grad_scale = ClipScale(local.grad_norm, hyper.max_grad_norm);
  LOCO_RETURN_IF_ERROR(cpu::AdamW(params_.data(), m_.data(), v_.data(), grad.data(),
                                  params_.size(), static_cast<int64_t>(version_ + 1), hyper,
                                  local.grad_scale));
  ++version_;
  if (stats != nullptr) *stats = local;
  return Status::Ok();
}

}  // namespace loco

#include "server/shard_store.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "common/parallel_for.h"

namespace loco {
namespace {

// A span of the shard (local indices, [begin, end)) with its AdamW
// hyper-parameters, checked once per step.
struct ValidatedSpan {
  size_t begin = 0;
  size_t end = 0;
  ValidatedAdamWParams params;
  bool add_mean = false;  // p += grad instead of AdamW (HyperSpan::add_mean)
};

using SpanIterator = std::vector<ValidatedSpan>::const_iterator;

// The first span that ends after `index`.
SpanIterator FirstSpanAfter(const std::vector<ValidatedSpan>& spans, size_t index) {
  return std::upper_bound(spans.begin(), spans.end(), index,
                          [](size_t i, const ValidatedSpan& s) { return i < s.end; });
}

// The update of elements [begin, begin + count) of the shard, each span the
// piece meets with its own hyper-parameters (spans in order, covering the
// shard): AdamW, or for an add_mean span p += grad (unscaled: clipping is
// for gradients). `grad` holds the piece's count values.
Status UpdateBySpan(float* params, float* m, float* v, const float* grad, size_t begin,
                    size_t count, int64_t step, const std::vector<ValidatedSpan>& spans,
                    float grad_scale) {
  const size_t end = begin + count;
  for (auto span = FirstSpanAfter(spans, begin); span != spans.end() && span->begin < end;
       ++span) {
    const size_t from = std::max<size_t>(begin, span->begin);
    const size_t to = std::min<size_t>(end, span->end);
    if (span->add_mean) {
      for (size_t i = from; i < to; ++i) params[i] += grad[i - begin];
      continue;
    }
    LOCO_RETURN_IF_ERROR(cpu::AdamW(params + from, m + from, v + from, grad + (from - begin),
                                    to - from, step, span->params, grad_scale));
  }
  return Status::Ok();
}

// Adds the squared norm of the piece's gradient elements into `lanes`,
// leaving out add_mean spans (they carry values, not gradients). A piece
// that meets none is summed whole, as it always was.
void AddGradientNorm(const float* grad, size_t begin, size_t count,
                     const std::vector<ValidatedSpan>& spans, bool any_add_mean, double* lanes) {
  if (!any_add_mean) {
    cpu::AddSquaredNormLanes(grad, count, lanes);
    return;
  }
  const size_t end = begin + count;
  for (auto span = FirstSpanAfter(spans, begin); span != spans.end() && span->begin < end;
       ++span) {
    if (span->add_mean) continue;
    const size_t from = std::max<size_t>(begin, span->begin);
    const size_t to = std::min<size_t>(end, span->end);
    cpu::AddSquaredNormLanes(grad + (from - begin), to - from, lanes);
  }
}

Status CheckVersion(uint64_t version) {
  if (version <= ShardStore::kMaxVersion) return Status::Ok();
  return InvalidArgument("version " + std::to_string(version) + " is past the last one, " +
                         std::to_string(ShardStore::kMaxVersion) +
                         " (AdamW counts steps in int64)");
}

}  // namespace

Status ShardStore::Initialize(ShardRange range, std::vector<float> values, uint64_t version) {
  if (initialized_) return FailedPrecondition("shard already initialised");
  LOCO_RETURN_IF_ERROR(CheckVersion(version));
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
  LOCO_RETURN_IF_ERROR(CheckVersion(version));
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
  LOCO_RETURN_IF_ERROR(CheckVersion(version));
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
                         ApplyStats* stats, size_t threads, const PieceApplied& applied) {
  return Apply(grad, HyperGroups::Uniform(params_.size(), hyper), stats, threads, applied);
}

Status ShardStore::Apply(const GradientPieces& grad, const HyperGroups& hyper,
                         ApplyStats* stats, size_t threads, const PieceApplied& applied) {
  if (!initialized_) return FailedPrecondition("shard not initialised");
  if (version_ >= kMaxVersion) {
    return FailedPrecondition("version " + std::to_string(version_) +
                              " is the last: no step follows it (AdamW counts steps in int64)");
  }
  LOCO_RETURN_IF_ERROR(hyper.Validate(params_.size()));
  // Validated once for the step: every piece below steps with these and
  // checks nothing of them again.
  std::vector<ValidatedSpan> spans;
  spans.reserve(hyper.spans().size());
  for (const HyperSpan& span : hyper.spans()) {
    StatusOr<ValidatedAdamWParams> valid = ValidatedAdamWParams::Validate(span.params);
    if (!valid.ok()) return valid.status();
    spans.push_back({span.begin, span.end, std::move(valid).value(), span.add_mean});
  }
  const bool any_add_mean =
      std::any_of(spans.begin(), spans.end(), [](const ValidatedSpan& s) { return s.add_mean; });
  const size_t n = params_.size();
  LOCO_RETURN_IF_ERROR(AllocateMoments());
  const size_t pieces = (n + kApplyPiece - 1) / kApplyPiece;
  const size_t workers = ParallelWorkers(pieces, threads);
  std::vector<std::vector<float>> scratch(workers, std::vector<float>(std::min(n, kApplyPiece)));
  // Eight lanes per piece, each piece's from zero, added in piece order
  // below: the same sum whichever thread took which piece.
  std::vector<std::array<double, 8>> lanes(pieces, std::array<double, 8>{});
  // Piece `piece` of the mean gradient, produced in `worker`'s scratch.
  struct Piece {
    size_t begin, count;
    const float* values;
  };
  const auto piece_of = [&](size_t piece, size_t worker) {
    const size_t begin = piece * kApplyPiece, count = std::min(kApplyPiece, n - begin);
    return Piece{begin, count, grad(begin, count, scratch[worker].data())};
  };
  const auto norm = [&] {
    double total[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (const auto& l : lanes) {
      for (size_t k = 0; k < 8; ++k) total[k] += l[k];
    }
    return std::sqrt(cpu::CombineSquaredNormLanes(total));
  };
  const int64_t t = static_cast<int64_t>(version_ + 1);
  ApplyStats local;
  local.threads = workers;
  // Without clipping the norm is only reported, so one pass computes it and
  // applies AdamW; with clipping the scale must be known first.
  const bool clipping = hyper.max_grad_norm() > 0.0f;
  if (clipping) {
    ParallelFor(pieces, workers, [&](size_t piece, size_t worker) {
      const Piece g = piece_of(piece, worker);
      AddGradientNorm(g.values, g.begin, g.count, spans, any_add_mean, lanes[piece].data());
    });
    local.grad_norm = norm();
    local.grad_scale = ClipScale(local.grad_norm, hyper.max_grad_norm());
  }
  std::vector<Status> failed(workers, Status::Ok());
  ParallelFor(pieces, workers, [&](size_t piece, size_t worker) {
    const Piece g = piece_of(piece, worker);
    if (!clipping) {
      AddGradientNorm(g.values, g.begin, g.count, spans, any_add_mean, lanes[piece].data());
    }
    // Cannot fail: the hyper-parameters were validated above, the step and
    // the scale are valid and the pointers are not null (count > 0).
    Status s = UpdateBySpan(params_.data(), m_.data(), v_.data(), g.values, g.begin, g.count, t,
                           spans, local.grad_scale);
    if (!s.ok() && failed[worker].ok()) failed[worker] = std::move(s);
    if (s.ok() && applied) applied(g.begin, g.count, scratch[worker].data());
  });
  for (Status& s : failed) LOCO_RETURN_IF_ERROR(std::move(s));
  if (!clipping) local.grad_norm = norm();
  ++version_;
  if (stats != nullptr) *stats = local;
  return Status::Ok();
}

}  // namespace loco

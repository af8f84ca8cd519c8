// ShardStore: one shard's optimizer state: fp32 master parameters, AdamW's
// first and second moments m and v, and the version (optimizer steps applied).
//
// m and v start at zero and are allocated by AllocateMoments (the owner
// calls it once the first step's payloads start to arrive) or else by the
// first Apply, not by Initialize: until then they would only hold zeros,
// and a server's start (the initial values arriving, every worker pulling
// a full fp32 copy) is when the rest of its memory peaks.
//
// A plain value type (copyable) so that a snapshot is a copy; checkpointing
// serialises exactly these fields. Not thread-safe: the owner serialises
// access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "common/shard_layout.h"
#include "common/status.h"
#include "kernels/adamw.h"
#include "server/hyper_groups.h"

namespace loco {

struct ApplyStats {
  double grad_norm = 0;     // of this shard's mean gradient, before clipping
  float grad_scale = 1.0f;  // the clipping factor applied (1 = none)
  size_t threads = 1;       // threads the step ran on
};

class ShardStore {
 public:
  ShardStore() = default;

  // AdamW counts steps in int64 and the step from version v is v + 1: no
  // step follows kMaxVersion (Apply refuses it), and Initialize, Restore and
  // FastForward refuse a version above it (InvalidArgument).
  static constexpr uint64_t kMaxVersion = std::numeric_limits<int64_t>::max();

  // Sets params from `values` (range.length of them), m = v = 0 (not yet
  // allocated), version = `version`. FailedPrecondition when already
  // initialised.
  Status Initialize(ShardRange range, std::vector<float> values, uint64_t version = 0);
  // Sets the whole state from a checkpoint: params, m and v (range.length
  // each, or m and v both empty for zeros) at `version`.
  // FailedPrecondition when already initialised.
  Status Restore(ShardRange range, uint64_t version, std::vector<float> params,
                 std::vector<float> m, std::vector<float> v);
  // Moves the version forward to `version` without touching the values (a
  // shard restored behind the cluster adopts the cluster's step; the steps
  // in between are lost on this shard). FailedPrecondition when not
  // initialised or when `version` is below the current one.
  Status FastForward(uint64_t version);

  // One AdamW step with the shard's mean gradient `grad` (length() values),
  // on the calling thread:
  // optional clipping by this shard's gradient norm (grad_scale =
  // ClipScale(||grad||, max_grad_norm); the norm is per shard, not global,
  // because no server sees the other shards' gradients), then cpu::AdamW
  // with step = version + 1, then version++. Nothing changes on error.
  //
  // The hyper-parameters are validated once per call (InvalidArgument when
  // they are not valid); the pieces' cpu::AdamW calls take them validated
  // (ValidatedAdamWParams) and do not check them again.
  Status Apply(const std::vector<float>& grad, const AdamWParams& hyper, ApplyStats* stats);

  // The same step with the mean gradient produced piece by piece, so that it
  // is never held whole (a shard of n elements saves 4n bytes): `grad` is
  // called for consecutive pieces [begin, begin + count) with begin a
  // multiple of kApplyPiece and count <= kApplyPiece, and returns where the
  // piece's values are: in `scratch` (count floats, the callee writes them
  // there) or in storage of its own. It must not fail (validate first) and
  // must return the same values when a piece is asked for again: with
  // clipping on, every piece is produced twice (once for the norm, once for
  // AdamW). Bit for bit the same result as Apply with the whole vector.
  //
  // With threads > 1 the pieces are shared out among up to that many
  // threads (common/parallel_for.h): `grad` is then called concurrently for
  // distinct pieces, each call with a scratch of its thread's own, and must
  // be safe for that. The result is bit for bit the same for every thread
  // count: the norm is summed piece by piece in piece order
  // (cpu::AddSquaredNormLanes per piece, the pieces' lanes added in order),
  // which is within rounding of cpu::SquaredNorm of the whole vector.
  //
  // `applied`, when set, is called on the apply thread right after AdamW
  // wrote params()[begin, begin + count) of a piece, with that thread's
  // scratch (kApplyPiece floats, free to use): the piece's new values are
  // final while the other pieces are still being computed, and version()
  // has not moved yet. Calls for distinct pieces may run concurrently.
  //
  // Each span of `hyper` (HyperGroups: spans covering [0, length()) in
  // order) steps with its own AdamW hyper-parameters, or, for an add_mean
  // span, adds the mean push to the parameters (no moments, no clipping);
  // the norm and its clipping use hyper.max_grad_norm() over the AdamW
  // spans of the whole shard. A piece that straddles
  // spans is stepped span by span, element for element as if whole.
  using GradientPieces =
      std::function<const float*(size_t begin, size_t count, float* scratch)>;
  using PieceApplied = std::function<void(size_t begin, size_t count, float* scratch)>;
  static constexpr size_t kApplyPiece = 64 * 1024;
  Status Apply(const GradientPieces& grad, const HyperGroups& hyper, ApplyStats* stats,
               size_t threads = 1, const PieceApplied& applied = nullptr);
  // The same with one set of hyper-parameters for the whole shard.
  Status Apply(const GradientPieces& grad, const AdamWParams& hyper, ApplyStats* stats,
               size_t threads = 1, const PieceApplied& applied = nullptr);

  // Allocates m and v (zeros) if they are not yet; a no-op after. Writing
  // 8 bytes per element into fresh pages takes a while: the owner calls it
  // while a step waits for its pushes, so that the first step's AdamW does
  // not pay it. FailedPrecondition when not initialised.
  Status AllocateMoments();

  bool initialized() const { return initialized_; }
  uint64_t version() const { return version_; }
  ShardRange range() const { return range_; }
  size_t length() const { return params_.size(); }
  const std::vector<float>& params() const { return params_; }
  // Empty (standing for length() zeros) until AllocateMoments or the first
  // Apply allocates them; Restore accepts them empty as well.
  const std::vector<float>& m() const { return m_; }
  const std::vector<float>& v() const { return v_; }

 private:
  bool initialized_ = false;
  uint64_t version_ = 0;
  ShardRange range_;
  std::vector<float> params_, m_, v_;
};

}  // namespace loco

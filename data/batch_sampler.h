// BatchSampler: which training samples a worker uses at each global step, so
// that W workers together see every sample exactly once per data epoch,
// whatever W is.
//
// Global positions: step t covers positions [t·B, (t+1)·B) of an endless
// sequence; position p is sample perm_e[p mod N] of data epoch e = p div N,
// where perm_e is a permutation of [0, N) seeded by (seed, e). A batch that
// crosses N wraps into the next data epoch. Rank r of W takes the
// contiguous slice [t·B + off_r, t·B + off_r + b_r) with b_r = B/W, plus one
// for the first B mod W ranks (off_r = Σ_{q<r} b_q). Workers that share the
// seed compute the same permutations without talking to each other.
//
// Not thread-safe (caches the permutations it last built).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"

namespace loco {

class BatchSampler {
 public:
  // num_samples N >= 1, global_batch B >= 1.
  static StatusOr<BatchSampler> Create(size_t num_samples, size_t global_batch, uint64_t seed);

  // [first, first + count) global positions of rank `rank` of `world` at `step`.
  struct Range {
    uint64_t first = 0;
    size_t count = 0;
  };
  Range RankRange(uint64_t step, uint32_t world, uint32_t rank) const;

  // Sample indices for rank `rank` of `world` at `step`; empty when the rank
  // gets no samples (world > B). Preconditions: world >= 1, rank < world.
  std::vector<size_t> Indices(uint64_t step, uint32_t world, uint32_t rank);

  // Sample index at global position p.
  size_t SampleAt(uint64_t position);

  size_t num_samples() const { return n_; }
  size_t global_batch() const { return batch_; }
  // Steps per data epoch, ceil(N / B) (the training loop's "epoch").
  uint64_t steps_per_epoch() const { return (n_ + batch_ - 1) / batch_; }

 private:
  BatchSampler(size_t n, size_t batch, uint64_t seed) : n_(n), batch_(batch), seed_(seed) {}
  const std::vector<uint32_t>& Permutation(uint64_t epoch);

  size_t n_, batch_;
  uint64_t seed_;
  // Two cached epochs: a batch touches at most two consecutive ones.
  uint64_t cached_epoch_[2] = {UINT64_MAX, UINT64_MAX};
  std::vector<uint32_t> cached_perm_[2];
  int next_slot_ = 0;
};

}  // namespace loco

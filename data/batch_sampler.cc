#include "data/batch_sampler.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>

namespace loco {

StatusOr<BatchSampler> BatchSampler::Create(size_t num_samples, size_t global_batch,
                                            uint64_t seed) {
  if (num_samples == 0 || num_samples > UINT32_MAX) {
    return InvalidArgument("BatchSampler: num_samples = " + std::to_string(num_samples) +
                           "; expected 1 .. 4294967295");
  }
  if (global_batch == 0) return InvalidArgument("BatchSampler: global_batch must be >= 1");
  return BatchSampler(num_samples, global_batch, seed);
}

BatchSampler::Range BatchSampler::RankRange(uint64_t step, uint32_t world, uint32_t rank) const {
  const size_t base = batch_ / world, extra = batch_ % world;
  const size_t count = base + (rank < extra ? 1 : 0);
  const size_t offset = rank * base + std::min<size_t>(rank, extra);
  return Range{step * batch_ + offset, count};
}

const std::vector<uint32_t>& BatchSampler::Permutation(uint64_t epoch) {
  for (int s = 0; s < 2; ++s) {
    if (cached_epoch_[s] == epoch) return cached_perm_[s];
  }
  const int s = next_slot_;
  next_slot_ ^= 1;
  std::vector<uint32_t>& perm = cached_perm_[s];
  perm.resize(n_);
  std::iota(perm.begin(), perm.end(), 0u);
  // Fisher-Yates with our own index draw (std::shuffle's use of the
  // generator is implementation-defined; this is the same everywhere).
  std::mt19937_64 rng(seed_ ^ (0x9E3779B97F4A7C15ull * (epoch + 1)));
  for (size_t i = n_ - 1; i > 0; --i) {
    const size_t j = static_cast<size_t>(rng() % (i + 1));
    std::swap(perm[i], perm[j]);
  }
  cached_epoch_[s] = epoch;
  return perm;
}

size_t BatchSampler::SampleAt(uint64_t position) {
  return Permutation(position / n_)[position % n_];
}

std::vector<size_t> BatchSampler::Indices(uint64_t step, uint32_t world, uint32_t rank) {
  const Range r = RankRange(step, world, rank);
  std::vector<size_t> out(r.count);
  for (size_t i = 0; i < r.count; ++i) out[i] = SampleAt(r.first + i);
  return out;
}

}  // namespace loco

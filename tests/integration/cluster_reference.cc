#include "tests/integration/cluster_reference.h"

#include <cmath>
#include <utility>

#include "kernels/quantize.h"

namespace loco::test {

ClusterReference::ClusterReference(CompressionConfig codec, AdamWParams hyper,
                                   std::vector<ShardRange> shards, const std::vector<float>& init)
    : codec_(codec),
      hyper_(hyper),
      shards_(std::move(shards)),
      p_(init.begin(), init.end()),
      m_(init.size(), 0.0),
      v_(init.size(), 0.0) {
  EXPECT_EQ(hyper_.max_grad_norm, 0.0f) << "the reference does not model clipping";
  uint64_t next = 0;
  for (const ShardRange& r : shards_) {
    EXPECT_EQ(r.offset, next) << "shards must be contiguous";
    next = r.offset + r.length;
  }
  EXPECT_EQ(next, init.size()) << "shards must cover the model";
}

void ClusterReference::AddWorker(int id) {
  std::vector<ErrorState> states;
  for (const ShardRange& r : shards_) {
    states.emplace_back(static_cast<size_t>(r.length), codec_.block_size, codec_.error_bits);
  }
  states_[id] = std::move(states);
}

::testing::AssertionResult ClusterReference::Compress(int id, int64_t step,
                                                      const std::vector<float>& g,
                                                      std::vector<ErrorState>* states,
                                                      std::vector<double>* sum) const {
  for (size_t k = 0; k < shards_.size(); ++k) {
    const size_t offset = static_cast<size_t>(shards_[k].offset);
    const size_t length = static_cast<size_t>(shards_[k].length);
    LocoParams lp;
    lp.mode = codec_.mode;
    lp.bits = codec_.bits;
    lp.block_size = codec_.block_size;
    lp.beta = codec_.beta;
    lp.reset_period = codec_.reset_period;
    lp.rounding = Rounding::kNearest;
    lp.index_offset = offset;
    lp.error_bits = codec_.error_bits;
    std::vector<uint8_t> codes(PackedBytes(length, codec_.bits));
    std::vector<float> scales(NumBlocks(length, codec_.block_size));
    std::vector<float> decoded(length);
    LocoStats stats;
    Status s = cpu::LocoCompress(g.data() + offset, length, step, lp, (*states)[k].view(),
                                 codes.data(), scales.data(), &stats);
    if (s.ok()) {
      s = cpu::Dequantize(codes.data(), scales.data(), length, codec_.bits, codec_.block_size,
                          decoded.data());
    }
    if (!s.ok()) {
      return ::testing::AssertionFailure()
             << "worker " << id << ", shard " << k << ", step " << step << ": " << s.ToString();
    }
    for (size_t i = 0; i < length; ++i) (*sum)[offset + i] += decoded[i];
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ClusterReference::Step(int64_t step,
                                                  const std::map<int, std::vector<float>>& grads) {
  if (grads.empty()) return ::testing::AssertionFailure() << "a step needs at least one worker";
  // Work on copies of the error states so that a failure changes nothing.
  std::map<int, std::vector<ErrorState>> next;
  std::vector<double> sum(p_.size(), 0.0);
  for (const auto& [id, g] : grads) {
    auto it = states_.find(id);
    if (it == states_.end()) {
      return ::testing::AssertionFailure() << "worker " << id << " was never added";
    }
    if (g.size() != p_.size()) {
      return ::testing::AssertionFailure()
             << "worker " << id << "'s gradient has " << g.size() << " elements, not " << p_.size();
    }
    std::vector<ErrorState> states = it->second;
    auto ok = Compress(id, step, g, &states, &sum);
    if (!ok) return ok;
    next[id] = std::move(states);
  }
  for (auto& [id, states] : next) states_[id] = std::move(states);
  const double n = static_cast<double>(grads.size());
  for (double& x : sum) x /= n;
  AdamW(sum);
  return ::testing::AssertionSuccess();
}

void ClusterReference::AdamW(const std::vector<double>& g) {
  ++t_;
  const double lr = hyper_.lr, b1 = hyper_.beta1, b2 = hyper_.beta2, eps = hyper_.eps;
  const double wd = hyper_.weight_decay;
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(t_));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(t_));
  for (size_t i = 0; i < p_.size(); ++i) {
    p_[i] *= 1.0 - lr * wd;
    m_[i] = b1 * m_[i] + (1.0 - b1) * g[i];
    v_[i] = b2 * v_[i] + (1.0 - b2) * g[i] * g[i];
    p_[i] -= (lr / bc1) * m_[i] / (std::sqrt(v_[i] / bc2) + eps);
  }
}

}  // namespace loco::test

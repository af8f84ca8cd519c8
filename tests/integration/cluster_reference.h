// ClusterReference: what a LoCo-PS cluster must compute, rebuilt in the test
// from the kernels' documented contracts rather than from the worker or
// server code:
//   * per worker and per shard, an error state of its own, compressed with
//     cpu::LocoCompress using the LocoParams a worker derives from its
//     options (mode, bits, block, beta, reset period, nearest rounding,
//     index_offset = shard offset) and decoded with cpu::Dequantize;
//   * the mean of the decoded payloads of the workers that took part in the
//     step, summed in double;
//   * AdamW in double, written from kernels/adamw.h's formula (PyTorch
//     ordering, decoupled weight decay, bias correction).
//
// Not thread-safe; the test's main thread drives it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/loco_compress.h"
#include "common/shard_layout.h"

namespace loco::test {

struct CompressionConfig {
  CompensationMode mode = CompensationMode::kLoco;
  int bits = 4;
  int block_size = 128;
  float beta = 0.5f;
  int64_t reset_period = 0;
  int error_bits = 8;
};

class ClusterReference {
 public:
  // `shards` is the shard map (contiguous, covering init.size() elements).
  // Gradient clipping is not modelled: hyper.max_grad_norm must be 0.
  ClusterReference(CompressionConfig codec, AdamWParams hyper, std::vector<ShardRange> shards,
                   const std::vector<float>& init);

  // Registers worker `id` with zero error states, as a freshly joined worker.
  void AddWorker(int id);

  // Step `step` (0-based, the global step index that drives the reset
  // period): the servers average the payloads of exactly the workers in
  // `grads` (worker id -> full-length gradient). Fails on an unknown worker,
  // a wrong size or a kernel error, and then changes nothing.
  ::testing::AssertionResult Step(int64_t step, const std::map<int, std::vector<float>>& grads);

  const std::vector<double>& params() const { return p_; }
  const std::vector<double>& m() const { return m_; }
  const std::vector<double>& v() const { return v_; }
  int64_t steps() const { return t_; }

 private:
  // Decodes worker `id`'s payloads for `g` at `step` into `sum` (+=).
  ::testing::AssertionResult Compress(int id, int64_t step, const std::vector<float>& g,
                                      std::vector<ErrorState>* states,
                                      std::vector<double>* sum) const;
  void AdamW(const std::vector<double>& g);

  CompressionConfig codec_;
  AdamWParams hyper_;
  std::vector<ShardRange> shards_;
  std::map<int, std::vector<ErrorState>> states_;  // worker id -> per shard
  std::vector<double> p_, m_, v_;
  int64_t t_ = 0;
};

}  // namespace loco::test

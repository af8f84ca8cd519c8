// LoCo compression, fused in one pass over the data (DESIGN §1):
//
//   h      = g + ê                          (mode kNaive: h = g)
//   q, s   = Q_b(h)                          (kernels/quantize.h layout)
//   ĥ      = D(q, s)
//   e      = β·ê + (1 − β)·(h − ĥ)           (kEf: β = 0, i.e. e = h − ĥ)
//   ê'     = D8(Q8(e))                       (int8 codes + one fp32 scale per block,
//                                             nearest rounding, same block size)
//   if reset_period > 0 and (step + 1) % reset_period == 0: ê' = 0
//
// Mode kNaive leaves the error state untouched (it may be empty). The state
// costs 1 byte per element plus one float per block.
//
// Non-finite g (or h) elements are counted in stats->nonfinite, quantized as
// 0 and their error entry is set to 0; the payload is always finite.
// stats->error_sq_norm is Σ ê'^2 (the new stored error), for metrics.
//
// CPU and CUDA produce bit-identical payload codes and state codes for the
// same inputs (nearest rounding); scales are bit-identical too.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "kernels/quantize.h"

namespace loco {

enum class CompensationMode { kNaive, kEf, kLoco };

struct LocoParams {
  CompensationMode mode = CompensationMode::kLoco;
  int bits = 4;
  int block_size = 128;
  float beta = 0.5f;         // weight on the old error (ignored unless kLoco)
  int64_t reset_period = 0;  // T_c; 0 = never (kLoco only)
  Rounding rounding = Rounding::kNearest;
  uint64_t seed = 0;
  uint64_t index_offset = 0;  // see QuantizeParams::index_offset
};

// The per-range error state ê, owned by the caller (host memory for cpu::,
// device memory for cuda::). codes[n] int8, scales[NumBlocks(n, block)].
struct ErrorStateView {
  int8_t* codes = nullptr;
  float* scales = nullptr;
};

// Host-side owner of an error state, zero-initialised (ê = 0).
class ErrorState {
 public:
  ErrorState() = default;
  ErrorState(size_t n, int block_size)
      : n_(n), codes_(n, 0), scales_(NumBlocks(n, block_size), 0.0f) {}
  ErrorStateView view() { return {codes_.data(), scales_.data()}; }
  size_t size() const { return n_; }
  // Bytes held: n + 4 * blocks.
  size_t bytes() const { return codes_.size() + scales_.size() * sizeof(float); }
  const std::vector<int8_t>& codes() const { return codes_; }
  const std::vector<float>& scales() const { return scales_; }
  std::vector<int8_t>& mutable_codes() { return codes_; }
  std::vector<float>& mutable_scales() { return scales_; }
  void Reset() {
    std::fill(codes_.begin(), codes_.end(), 0);
    std::fill(scales_.begin(), scales_.end(), 0.0f);
  }

 private:
  size_t n_ = 0;
  std::vector<int8_t> codes_;
  std::vector<float> scales_;
};

struct LocoStats {
  uint64_t nonfinite = 0;
  double error_sq_norm = 0;
};

Status ValidateLocoParams(const LocoParams& p);

namespace cpu {

// g[n] + state -> codes[PackedBytes(n,bits)], scales[NumBlocks(n,block)]; updates state in place.
// `step` is the 0-based step index (for the reset period).
Status LocoCompress(const float* g, size_t n, int64_t step, const LocoParams& p,
                    ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats);

}  // namespace cpu

namespace cuda {

// Device pointers; stats is a host pointer (nullable; the call synchronises when set).
Status LocoCompress(const float* g, size_t n, int64_t step, const LocoParams& p,
                    ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats,
                    void* stream);

}  // namespace cuda
}  // namespace loco

// LoCo compression, fused in one pass over the data (DESIGN §1):
//
//   h      = g + ê                          (mode kNaive: h = g)
//   q, s   = Q_b(h)                          (kernels/quantize.h layout)
//   ĥ      = D(q, s)
//   e      = β·ê + (1 − β)·(h − ĥ)           (kEf: β = 0, i.e. e = h − ĥ)
//   ê'     = D8(Q8(e))                       (int8 codes + one fp32 scale per block,
//                                             nearest rounding, same block size;
//                                             error_bits = 32 stores e in fp32
//                                             instead: classic error feedback)
//   if reset_period > 0 and (step + 1) % reset_period == 0: ê' = 0
//
// Mode kNaive leaves the error state untouched (it may be empty). With
// error_bits = 8 (the default) the state costs 1 byte per element plus one
// float per block; with error_bits = 32 it costs 4 bytes per element.
//
// Non-finite g (or h) elements are counted in stats->nonfinite, quantized as
// 0 and their error entry is set to 0; the payload is always finite.
// stats->error_sq_norm is Σ ê'^2 (the new stored error), for metrics.
// cpu:: also sets stats->grad_sq_norm = Σ g² over the finite g, taken in the
// same pass (a metric: float squares per block, summed in double, so within
// ~1e-5 relative of an fp64 sum, not bit-exact: the AVX-512 and portable
// paths sum in different lane orders); cuda:: leaves it 0.
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
  int error_bits = 8;         // 8: int8 codes + block scales; 32: fp32 error values
};

// The per-range error state ê, owned by the caller (host memory for cpu::,
// device memory for cuda::). error_bits 8: codes[n] int8 and
// scales[NumBlocks(n, block)]; error_bits 32: values[n] fp32.
struct ErrorStateView {
  int8_t* codes = nullptr;
  float* scales = nullptr;
  float* values = nullptr;
};

// Host-side owner of an error state, zero-initialised (ê = 0).
class ErrorState {
 public:
  ErrorState() = default;
  ErrorState(size_t n, int block_size, int error_bits = 8) : n_(n) {
    if (error_bits == 32) {
      values_.assign(n, 0.0f);
    } else {
      codes_.assign(n, 0);
      scales_.assign(NumBlocks(n, block_size), 0.0f);
    }
  }
  ErrorStateView view() { return {codes_.data(), scales_.data(), values_.data()}; }
  size_t size() const { return n_; }
  // Bytes held: n + 4 * blocks (8-bit), or 4 * n (32-bit).
  size_t bytes() const {
    return codes_.size() + (scales_.size() + values_.size()) * sizeof(float);
  }
  const std::vector<float>& values() const { return values_; }
  std::vector<float>& mutable_values() { return values_; }
  const std::vector<int8_t>& codes() const { return codes_; }
  const std::vector<float>& scales() const { return scales_; }
  std::vector<int8_t>& mutable_codes() { return codes_; }
  std::vector<float>& mutable_scales() { return scales_; }
  void Reset() {
    std::fill(codes_.begin(), codes_.end(), 0);
    std::fill(scales_.begin(), scales_.end(), 0.0f);
    std::fill(values_.begin(), values_.end(), 0.0f);
  }

 private:
  size_t n_ = 0;
  std::vector<int8_t> codes_;
  std::vector<float> scales_;
  std::vector<float> values_;
};

struct LocoStats {
  uint64_t nonfinite = 0;
  double error_sq_norm = 0;
  double grad_sq_norm = 0;  // cpu:: only (see the header comment)
};

Status ValidateLocoParams(const LocoParams& p);

namespace cpu {

// g[n] + state -> codes[PackedBytes(n,bits)], scales[NumBlocks(n,block)]; updates state in place.
// `step` is the 0-based step index (for the reset period). Thread-safe for
// disjoint outputs. Stack: the vector paths keep three blocks in flight in
// buffers sized for the largest block (kernels/loco_compress_simd_inl.h),
// about 132 KiB of the calling thread's stack, so call it from threads with
// at least 256 KiB (glibc's default is 8 MiB; musl's 128 KiB is too small).
Status LocoCompress(const float* g, size_t n, int64_t step, const LocoParams& p,
                    ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats);

// The path LocoCompress takes on this CPU for `p` ("avx512-icl", "avx512",
// "avx2" or "portable"), for logs and benchmarks. Static strings.
const char* LocoCompressPathName(const LocoParams& p);

}  // namespace cpu

namespace cuda {

// Device pointers; stats is a host pointer (nullable; the call synchronises when set).
Status LocoCompress(const float* g, size_t n, int64_t step, const LocoParams& p,
                    ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats,
                    void* stream);

}  // namespace cuda
}  // namespace loco

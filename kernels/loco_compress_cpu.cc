// CPU reference of fused LoCo compression (contract: kernels/loco_compress.h).
//
// Binding per-element arithmetic (fp32, one IEEE op per step, no FMA; the
// quantizer's rules are in kernels/quantize_inl.h):
//   ehat = error_bits == 8 ? (float)code8 * scale8 : value32     (kNaive: unused)
//   h    = g + ehat                                              (kNaive: h = g)
//   h not finite (which covers g not finite)  -> counted in stats->nonfinite,
//        h := 0 and the element's new error := 0
//   q, s = Q_b(h) over the block;  hhat = (float)q * s;  r = h - hhat
//   kLoco: e = (beta * ehat) + ((1.0f - beta) * r)   (1.0f - beta computed once)
//   kEf:   e = r
//   e not finite -> e := 0 (only reachable when |h| is within an ulp of
//        FLT_MAX so that hhat overflows; keeps the state finite)
//   stored error: error_bits 8  -> scale8 = absmax(e)/127 (quantizer's underflow
//                                  rule), code8 = clamp(rne(e / scale8), ±127)
//                 error_bits 32 -> value32 = e
//   kLoco, reset_period > 0 and (step + 1) % reset_period == 0 -> the stored
//        error is all zero (codes 0, scales 0 / values 0); the payload of that
//        step still uses the old ehat.
//   stats->error_sq_norm = Σ ê'^2 in double; for error_bits 8 it is computed
//        per block as scale8^2 * Σ code8^2 (the exact square of the stored
//        value code8 * scale8).
// kNaive reads and writes no state (its pointers may be null).
//
// One pass over memory per block: g and the state are read once into stack
// buffers; payload codes, scales and the new state are written once.
#include <algorithm>
#include <string>

#include "kernels/loco_compress.h"
#include "kernels/quantize_inl.h"

namespace loco::cpu {
namespace {

using detail::Bits;
using detail::FromBits;
using detail::kAbsMask;
using detail::kExpMask;
using detail::kMaxBlock;

Status ValidateLocoCall(const float* g, size_t n, int64_t step, const LocoParams& p,
                        const ErrorStateView& state, const uint8_t* codes, const float* scales) {
  LOCO_RETURN_IF_ERROR(ValidateLocoParams(p));
  if (step < 0) {
    return InvalidArgument("step " + std::to_string(step) + " is negative (steps are 0-based)");
  }
  if (n == 0) return Status::Ok();
  if (g == nullptr || codes == nullptr || scales == nullptr) {
    return InvalidArgument("LocoCompress of " + std::to_string(n) +
                           " elements needs non-null g, codes and scales");
  }
  if (p.mode != CompensationMode::kNaive) {
    if (p.error_bits == 8 && (state.codes == nullptr || state.scales == nullptr)) {
      return InvalidArgument(
          "error state with error_bits 8 needs non-null codes and scales (ErrorState(n, block, 8))");
    }
    if (p.error_bits == 32 && state.values == nullptr) {
      return InvalidArgument(
          "error state with error_bits 32 needs non-null values (ErrorState(n, block, 32))");
    }
  }
  return Status::Ok();
}

struct BlockBuffers {
  alignas(64) float h[kMaxBlock];
  alignas(64) float e[kMaxBlock];  // ehat on the way in, the new error on the way out
  alignas(64) float u[kMaxBlock];
  alignas(64) uint32_t keep[kMaxBlock];
  alignas(64) int8_t q[kMaxBlock];
};

// Loads ehat of a block into buf.e, forms h = g + ehat, zeroes and counts the
// non-finite ones. Returns the non-finite count; *amax = bits of max|h|.
template <CompensationMode kMode, int kErrBits>
LOCO_CPU_INLINE uint32_t LoadBlock(const float* g, size_t len, const int8_t* code8, float scale8,
                   const float* value32, BlockBuffers& buf, uint32_t* amax) {
  if constexpr (kMode == CompensationMode::kNaive) {
    return detail::SanitizeAbsMax(g, len, buf.h, amax);
  } else {
    int32_t m = 0;
    uint32_t bad = 0;
    for (size_t i = 0; i < len; ++i) {
      float ehat;
      if constexpr (kErrBits == 8) {
        ehat = static_cast<float>(code8[i]) * scale8;
      } else {
        ehat = value32[i];
      }
      buf.e[i] = ehat;
      const uint32_t hb = Bits(g[i] + ehat);
      const int32_t a = static_cast<int32_t>(hb & kAbsMask);
      const uint32_t keep = a < static_cast<int32_t>(kExpMask) ? ~0u : 0u;
      buf.h[i] = FromBits(hb & keep);
      buf.keep[i] = keep;
      const int32_t ka = a & static_cast<int32_t>(keep);
      m = ka > m ? ka : m;
      bad += keep + 1u;
    }
    *amax = static_cast<uint32_t>(m);
    return bad;
  }
}

// buf.e := the new error e (see the header comment); returns bits of max|e|.
template <CompensationMode kMode>
LOCO_CPU_INLINE uint32_t NewError(size_t len, float s, float beta, BlockBuffers& buf) {
  const float one_minus_beta = 1.0f - beta;
  int32_t m = 0;
  for (size_t i = 0; i < len; ++i) {
    const float hhat = static_cast<float>(buf.q[i]) * s;
    const float r = buf.h[i] - hhat;
    float e;
    if constexpr (kMode == CompensationMode::kLoco) {
      e = (beta * buf.e[i]) + (one_minus_beta * r);
    } else {
      e = r;
    }
    const uint32_t eb = Bits(e);
    const int32_t a = static_cast<int32_t>(eb & kAbsMask);
    const uint32_t keep = (a < static_cast<int32_t>(kExpMask) ? ~0u : 0u) & buf.keep[i];
    buf.e[i] = FromBits(eb & keep);
    const int32_t ka = a & static_cast<int32_t>(keep);
    m = ka > m ? ka : m;
  }
  return static_cast<uint32_t>(m);
}

LOCO_CPU_INLINE double SumSquaresDouble(const float* x, size_t n) {
  // Eight independent partial sums: a fixed order, and no serial dependency
  // chain on the double adds.
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t j = 0; j < 8; ++j) {
      const double v = x[i + j];
      acc[j] += v * v;
    }
  }
  for (; i < n; ++i) acc[0] += static_cast<double>(x[i]) * x[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <CompensationMode kMode, int kErrBits>
LOCO_CPU_INLINE void CompressBlocks(const float* g, size_t n, bool reset, const LocoParams& p,
                    ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats) {
  BlockBuffers buf;
  const size_t block = static_cast<size_t>(p.block_size);
  const size_t bits = static_cast<size_t>(p.bits);
  const int qmax = QMax(p.bits);
  uint64_t nonfinite = 0;
  double sq = 0.0;
  size_t blk = 0;
  for (size_t b0 = 0; b0 < n; b0 += block, ++blk) {
    const size_t len = std::min(block, n - b0);
    uint32_t amax = 0;
    if constexpr (kMode == CompensationMode::kNaive) {
      nonfinite += LoadBlock<kMode, kErrBits>(g + b0, len, nullptr, 0.0f, nullptr, buf, &amax);
    } else if constexpr (kErrBits == 8) {
      nonfinite += LoadBlock<kMode, kErrBits>(g + b0, len, state.codes + b0, state.scales[blk],
                                              nullptr, buf, &amax);
    } else {
      nonfinite += LoadBlock<kMode, kErrBits>(g + b0, len, nullptr, 0.0f, state.values + b0, buf,
                                              &amax);
    }
    const float s = detail::ScaleFromAbsMax(amax, qmax);
    if (p.rounding == Rounding::kNearest) {
      detail::QuantizeNearest(buf.h, len, s, qmax, buf.q);
    } else {
      detail::QuantizeStochastic(buf.h, len, s, qmax, p.seed, p.index_offset + b0, buf.u, buf.q);
    }
    detail::PackCodes(p.bits, buf.q, len, codes + b0 * bits / 8);
    scales[blk] = s;

    if constexpr (kMode != CompensationMode::kNaive) {
      if (reset) {
        if constexpr (kErrBits == 8) {
          std::fill(state.codes + b0, state.codes + b0 + len, int8_t{0});
          state.scales[blk] = 0.0f;
        } else {
          std::fill(state.values + b0, state.values + b0 + len, 0.0f);
        }
        continue;
      }
      const uint32_t emax = NewError<kMode>(len, s, p.beta, buf);
      if constexpr (kErrBits == 8) {
        const float s8 = detail::ScaleFromAbsMax(emax, 127);
        detail::QuantizeNearest(buf.e, len, s8, 127, state.codes + b0);
        state.scales[blk] = s8;
        sq += static_cast<double>(s8) * static_cast<double>(s8) *
              static_cast<double>(detail::SumSquares(state.codes + b0, len));
      } else {
        std::copy(buf.e, buf.e + len, state.values + b0);
        sq += SumSquaresDouble(buf.e, len);
      }
    }
  }
  if (stats != nullptr) {
    stats->nonfinite = nonfinite;
    stats->error_sq_norm = sq;
  }
}

// One instantiation per (mode, error_bits); compiled per CPU clone.
LOCO_CPU_CLONES void CompressDispatch(const float* g, size_t n, bool reset, const LocoParams& p,
                                      ErrorStateView state, uint8_t* codes, float* scales,
                                      LocoStats* stats) {
  switch (p.mode) {
    case CompensationMode::kNaive:
      CompressBlocks<CompensationMode::kNaive, 8>(g, n, false, p, state, codes, scales, stats);
      break;
    case CompensationMode::kEf:
      if (p.error_bits == 8) {
        CompressBlocks<CompensationMode::kEf, 8>(g, n, false, p, state, codes, scales, stats);
      } else {
        CompressBlocks<CompensationMode::kEf, 32>(g, n, false, p, state, codes, scales, stats);
      }
      break;
    case CompensationMode::kLoco:
      if (p.error_bits == 8) {
        CompressBlocks<CompensationMode::kLoco, 8>(g, n, reset, p, state, codes, scales, stats);
      } else {
        CompressBlocks<CompensationMode::kLoco, 32>(g, n, reset, p, state, codes, scales, stats);
      }
      break;
  }
}

}  // namespace

Status LocoCompress(const float* g, size_t n, int64_t step, const LocoParams& p,
                    ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats) {
  LOCO_RETURN_IF_ERROR(ValidateLocoCall(g, n, step, p, state, codes, scales));
  const bool reset = p.mode == CompensationMode::kLoco && p.reset_period > 0 &&
                     (step + 1) % p.reset_period == 0;
  CompressDispatch(g, n, reset, p, state, codes, scales, stats);
  return Status::Ok();
}

}  // namespace loco::cpu

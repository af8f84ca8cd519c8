// CPU reference of fused LoCo compression (contract: kernels/loco_compress.h).
//
// Binding per-element arithmetic (fp32, one IEEE op per step, no FMA; the
// quantizer's rules are in kernels/quantize_inl.h):
//   ehat = error_bits == 8 ? (float)code8 * scale8 : value32     (kNaive: unused)
//   h    = g + ehat                                              (kNaive: h = g)
//   h not finite (which covers g not finite)  -> counted in stats->nonfinite,
//        h := 0 and the element's new error := 0
//   q, s = Q_b(h) over the block (codes from h * (qmax / absmax), see
//        kernels/quantize_inl.h);  hhat = (float)q * s;  r = h - hhat
//   kLoco: e = (beta * ehat) + ((1.0f - beta) * r)   (1.0f - beta computed once)
//   kEf:   e = r
//   e not finite -> e := 0 (only reachable when |h| is within an ulp of
//        FLT_MAX so that hhat overflows; keeps the state finite)
//   stored error: error_bits 8  -> scale8 = absmax(e)/127 (quantizer's underflow
//                                  rule), code8 = clamp(rne(e * inv8), ±127),
//                                  inv8 = 127 / absmax(e) (or e / scale8 where
//                                  that is not finite, as in the quantizer)
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
// buffers; payload codes, scales and the new state are written once. Within
// a block: load (h, absmax), one fused loop for the payload codes and the new
// error, one for the int8 state; non-finite values are handled by fix-up
// loops that run only for the blocks that contain them.
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/call_checks.h"
#include "kernels/loco_compress.h"
#include "kernels/loco_compress_avx512.h"
#include "kernels/quantize_inl.h"

namespace loco::cpu {
namespace {

using detail::Bits;
using detail::kAbsMask;
using detail::kExpMask;
using detail::kMaxBlock;


// The 8-lane helpers below are always inlined into one clone; GCC's note
// that a 32-byte vector changes the call ABI without AVX does not apply. (GCC
// reports it at the end of the file, so it stays off for the whole file.)
#pragma GCC diagnostic ignored "-Wpsabi"

struct BlockBuffers {
  alignas(64) float h[kMaxBlock];
  alignas(64) float e[kMaxBlock];  // ehat on the way in, the new error on the way out
  alignas(64) float u[kMaxBlock];
  alignas(64) int8_t q[kMaxBlock];
  alignas(64) uint8_t bad[kMaxBlock];  // 1 where h is not finite; set only when the block has one
};

// How far ahead of the block loop the gradient and the error codes are
// prefetched, in elements (2 KiB of gradient). The loop does enough work
// between loads that the hardware prefetcher alone leaves it waiting on
// memory: with this, 2^24 elements take ~19 instead of ~24 ms on one core
// (loco-bench-kernels). A prefetch past the end of the data is harmless.
constexpr size_t kPrefetchAhead = 512;

constexpr int32_t kAbs = static_cast<int32_t>(kAbsMask);
constexpr int32_t kExp = static_cast<int32_t>(kExpMask);

// Loads ehat of a block into buf.e and h = g + ehat into buf.h. A non-finite
// h is rare, so the loop neither tests nor masks: an Inf/NaN h has a larger
// |bit pattern| than any finite one, and only then does a second loop zero
// those h, mark them in buf.bad and recompute the absmax. Returns the
// non-finite count; *amax = bits of max|h| over the finite h; *gsq = Σ g²
// over the block's finite g (LocoStats::grad_sq_norm): 8 float lanes of
// squares, summed in double. A non-finite g, or a square past FLT_MAX,
// makes that sum non-finite, and only then is the block summed again in
// double, finite g only.
template <CompensationMode kMode, int kErrBits>
LOCO_CPU_INLINE uint32_t LoadBlock(const float* g, size_t len, const int8_t* code8, float scale8,
                                   const float* value32, BlockBuffers& buf, uint32_t* amax,
                                   bool* any_bad, double* gsq) {
  using detail::F8;
  using detail::I8;
  const size_t vec = len - len % detail::kLanes;
  const F8 s8 = detail::SplatF8(scale8);
  I8 m = I8{};
  F8 squares = F8{};
  for (size_t i = 0; i < vec; i += detail::kLanes) {
    __builtin_prefetch(g + i + kPrefetchAhead);
    if constexpr (kErrBits == 8 && kMode != CompensationMode::kNaive) {
      __builtin_prefetch(code8 + i + kPrefetchAhead);
    }
    F8 h = detail::LoadF8(g + i);
    squares += h * h;
    if constexpr (kMode != CompensationMode::kNaive) {
      F8 ehat;
      if constexpr (kErrBits == 8) {
        ehat = detail::CodesToF8(detail::LoadCodes8(code8 + i)) * s8;
      } else {
        ehat = detail::LoadF8(value32 + i);
      }
      detail::StoreF8(buf.e + i, ehat);
      h = h + ehat;
    }
    detail::StoreF8(buf.h + i, h);
    m = detail::MaxI8(m, detail::BitsI8(h) & kAbs);
  }
  int32_t mx = detail::LaneMax(m);
  double sq = 0.0;
  for (size_t j = 0; j < detail::kLanes; ++j) sq += static_cast<double>(squares[j]);
  for (size_t i = vec; i < len; ++i) {
    float h = g[i];
    sq += static_cast<double>(h * h);
    if constexpr (kMode != CompensationMode::kNaive) {
      const float ehat = kErrBits == 8 ? static_cast<float>(code8[i]) * scale8 : value32[i];
      buf.e[i] = ehat;
      h = h + ehat;
    }
    buf.h[i] = h;
    const int32_t a = static_cast<int32_t>(Bits(h) & kAbsMask);
    mx = a > mx ? a : mx;
  }
  if (!std::isfinite(sq)) {
    sq = 0.0;
    for (size_t i = 0; i < len; ++i) {
      if (std::isfinite(g[i])) sq += static_cast<double>(g[i]) * g[i];
    }
  }
  *gsq = sq;
  *any_bad = mx >= kExp;
  if (!*any_bad) {
    *amax = static_cast<uint32_t>(mx);
    return 0;
  }
  uint32_t bad = 0;
  mx = 0;
  for (size_t i = 0; i < len; ++i) {
    const int32_t a = static_cast<int32_t>(Bits(buf.h[i]) & kAbsMask);
    buf.bad[i] = a >= kExp ? 1 : 0;
    if (a >= kExp) {
      buf.h[i] = 0.0f;
      ++bad;
    } else {
      mx = a > mx ? a : mx;
    }
  }
  *amax = static_cast<uint32_t>(mx);
  return bad;
}

// The new error of one element (see the header comment), before the
// non-finite rules.
template <CompensationMode kMode>
LOCO_CPU_INLINE float ErrorOf(float h, float ehat, float code, float s, float beta,
                              float one_minus_beta) {
  const float r = h - code * s;
  if constexpr (kMode == CompensationMode::kLoco) {
    return (beta * ehat) + (one_minus_beta * r);
  } else {
    return r;
  }
}
template <CompensationMode kMode>
LOCO_CPU_INLINE detail::F8 ErrorOf8(detail::F8 h, detail::F8 ehat, detail::I8 code, detail::F8 s,
                                    detail::F8 beta, detail::F8 one_minus_beta) {
  const detail::F8 r = h - detail::CodesToF8(code) * s;
  if constexpr (kMode == CompensationMode::kLoco) {
    return (beta * ehat) + (one_minus_beta * r);
  } else {
    return r;
  }
}

// Payload codes of the block into buf.q and, when `track`, the new error
// into buf.e. Returns bits of max|e| over the finite e (0 when !track).
// Nearest rounding with a reciprocal (every block but all-zero and
// near-denormal ones) runs as one fused 8-lane loop; the other rules quantize
// with the runtime-length loops and then form e from the codes.
template <CompensationMode kMode>
LOCO_CPU_INLINE uint32_t CodesAndError(size_t len, float s, float inv, int qmax, bool track,
                                       bool any_bad, const LocoParams& p, uint64_t index0,
                                       BlockBuffers& buf) {
  using detail::F8;
  using detail::I8;
  const size_t vec = len - len % detail::kLanes;
  const float beta = p.beta;
  const float one_minus_beta = 1.0f - beta;
  const F8 sv = detail::SplatF8(s), betav = detail::SplatF8(beta),
           ombv = detail::SplatF8(one_minus_beta);
  I8 em = I8{};
  int32_t emax = 0;
  if (p.rounding == Rounding::kNearest && inv != 0.0f) {
    const F8 invv = detail::SplatF8(inv);
    const I8 qmaxv = detail::SplatI8(qmax);
    for (size_t i = 0; i < vec; i += detail::kLanes) {
      const F8 h = detail::LoadF8(buf.h + i);
      const I8 c = detail::NearestCodes8(h * invv, qmaxv);
      detail::StoreCodes8(buf.q + i, c);
      if (track) {
        const F8 e = ErrorOf8<kMode>(h, detail::LoadF8(buf.e + i), c, sv, betav, ombv);
        detail::StoreF8(buf.e + i, e);
        em = detail::MaxI8(em, detail::BitsI8(e) & kAbs);
      }
    }
    detail::QuantizeNearest(buf.h + vec, len - vec, s, inv, qmax, buf.q + vec);
  } else {
    if (p.rounding == Rounding::kNearest) {
      detail::QuantizeNearest(buf.h, len, s, inv, qmax, buf.q);
    } else {
      detail::QuantizeStochastic(buf.h, len, s, inv, qmax, p.seed, index0, buf.u, buf.q);
    }
    if (track) {
      for (size_t i = 0; i < vec; i += detail::kLanes) {
        const F8 e = ErrorOf8<kMode>(detail::LoadF8(buf.h + i), detail::LoadF8(buf.e + i),
                                     detail::LoadCodes8(buf.q + i), sv, betav, ombv);
        detail::StoreF8(buf.e + i, e);
        em = detail::MaxI8(em, detail::BitsI8(e) & kAbs);
      }
    }
  }
  if (!track) return 0;
  emax = detail::LaneMax(em);
  for (size_t i = vec; i < len; ++i) {
    const float e = ErrorOf<kMode>(buf.h[i], buf.e[i], static_cast<float>(buf.q[i]), s, beta,
                                   one_minus_beta);
    buf.e[i] = e;
    const int32_t a = static_cast<int32_t>(Bits(e) & kAbsMask);
    emax = a > emax ? a : emax;
  }
  if (any_bad || emax >= kExp) {
    // Rare: an element whose h was not finite, or an e that overflowed
    // (|h| within an ulp of FLT_MAX): its error is 0.
    emax = 0;
    for (size_t i = 0; i < len; ++i) {
      const int32_t a = static_cast<int32_t>(Bits(buf.e[i]) & kAbsMask);
      if (a >= kExp || (any_bad && buf.bad[i] != 0)) {
        buf.e[i] = 0.0f;
      } else {
        emax = a > emax ? a : emax;
      }
    }
  }
  return static_cast<uint32_t>(emax);
}

// Stores buf.e as int8 codes + scale; returns Σ code^2 (exact in int32).
LOCO_CPU_INLINE int32_t StoreError8(size_t len, uint32_t emax, const BlockBuffers& buf,
                                    int8_t* codes, float* scale) {
  using detail::F8;
  using detail::I8;
  const float s8 = detail::ScaleFromAbsMax(emax, 127);
  const float inv8 = detail::InverseFromAbsMax(emax, 127);
  *scale = s8;
  if (inv8 == 0.0f) {
    detail::QuantizeNearest(buf.e, len, s8, inv8, 127, codes);
    return detail::SumSquares(codes, len);
  }
  const size_t vec = len - len % detail::kLanes;
  const F8 invv = detail::SplatF8(inv8);
  const I8 qmaxv = detail::SplatI8(127);
  I8 sq = I8{};
  for (size_t i = 0; i < vec; i += detail::kLanes) {
    const I8 c = detail::NearestCodes8(detail::LoadF8(buf.e + i) * invv, qmaxv);
    detail::StoreCodes8(codes + i, c);
    sq += c * c;
  }
  detail::QuantizeNearest(buf.e + vec, len - vec, s8, inv8, 127, codes + vec);
  return detail::LaneSum(sq) + detail::SumSquares(codes + vec, len - vec);
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
  double sq = 0.0, grad_sq = 0.0;
  size_t blk = 0;
  for (size_t b0 = 0; b0 < n; b0 += block, ++blk) {
    const size_t len = std::min(block, n - b0);
    uint32_t amax = 0;
    bool any_bad = false;
    double block_grad_sq = 0.0;
    if constexpr (kMode == CompensationMode::kNaive) {
      nonfinite += LoadBlock<kMode, kErrBits>(g + b0, len, nullptr, 0.0f, nullptr, buf, &amax,
                                              &any_bad, &block_grad_sq);
    } else if constexpr (kErrBits == 8) {
      nonfinite += LoadBlock<kMode, kErrBits>(g + b0, len, state.codes + b0, state.scales[blk],
                                              nullptr, buf, &amax, &any_bad, &block_grad_sq);
    } else {
      nonfinite += LoadBlock<kMode, kErrBits>(g + b0, len, nullptr, 0.0f, state.values + b0, buf,
                                              &amax, &any_bad, &block_grad_sq);
    }
    grad_sq += block_grad_sq;
    const float s = detail::ScaleFromAbsMax(amax, qmax);
    const float inv = detail::InverseFromAbsMax(amax, qmax);
    const bool track = kMode != CompensationMode::kNaive && !reset;
    const uint32_t emax =
        CodesAndError<kMode>(len, s, inv, qmax, track, any_bad, p, p.index_offset + b0, buf);
    uint8_t* out = codes + b0 * bits / 8;  // block is a multiple of 32: starts on a byte
    if (len % 32 == 0) {
      detail::PackFullBlock(p.bits, buf.q, len, out);
    } else {
      detail::PackCodes(p.bits, buf.q, len, out);
    }
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
      if constexpr (kErrBits == 8) {
        const int32_t code_sq = StoreError8(len, emax, buf, state.codes + b0, state.scales + blk);
        const double s8 = state.scales[blk];
        sq += s8 * s8 * static_cast<double>(code_sq);
      } else {
        std::copy(buf.e, buf.e + len, state.values + b0);
        sq += SumSquaresDouble(buf.e, len);
      }
    }
  }
  if (stats != nullptr) {
    stats->nonfinite = nonfinite;
    stats->error_sq_norm = sq;
    stats->grad_sq_norm = grad_sq;
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

namespace {

// The path LocoCompress takes for `p` on this CPU: one decision, which the
// call and its name (LocoCompressPathName) share.
enum class CompressPath { kAvx512Icl, kAvx512, kAvx2, kPortable };

CompressPath CompressPathFor(const LocoParams& p) {
  if (!detail::Avx512Handles(p)) return CompressPath::kPortable;
  if (detail::HaveAvx512Icl()) return CompressPath::kAvx512Icl;
  if (detail::HaveAvx512()) return CompressPath::kAvx512;
  return detail::HaveAvx2() ? CompressPath::kAvx2 : CompressPath::kPortable;
}

}  // namespace

const char* LocoCompressPathName(const LocoParams& p) {
  switch (CompressPathFor(p)) {
    case CompressPath::kAvx512Icl:
      return "avx512-icl";
    case CompressPath::kAvx512:
      return "avx512";
    case CompressPath::kAvx2:
      return "avx2";
    case CompressPath::kPortable:
      break;
  }
  return "portable";
}

Status LocoCompress(const float* g, size_t n, int64_t step, const LocoParams& p,
                    ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats) {
  LOCO_RETURN_IF_ERROR(ValidateLocoCall(g, n, step, p, state, codes, scales));
  const bool reset = p.mode == CompensationMode::kLoco && p.reset_period > 0 &&
                     (step + 1) % p.reset_period == 0;
  switch (CompressPathFor(p)) {
    case CompressPath::kAvx512Icl:
      detail::LocoCompressAvx512Icl(g, n, reset, p, state, codes, scales, stats);
      break;
    case CompressPath::kAvx512:
      detail::LocoCompressAvx512(g, n, reset, p, state, codes, scales, stats);
      break;
    case CompressPath::kAvx2:
      detail::LocoCompressAvx2(g, n, reset, p, state, codes, scales, stats);
      break;
    case CompressPath::kPortable:
      CompressDispatch(g, n, reset, p, state, codes, scales, stats);
      break;
  }
  return Status::Ok();
}

namespace detail {

void LocoCompressPortable(const float* g, size_t n, bool reset, const LocoParams& p,
                          ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats) {
  CompressDispatch(g, n, reset, p, state, codes, scales, stats);
}

}  // namespace detail

}  // namespace loco::cpu

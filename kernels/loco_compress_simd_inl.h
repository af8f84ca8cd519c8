// The vector paths of cpu::LocoCompress, written once over an ISA's
// operations (Avx2Isa in kernels/simd_avx2.h, Avx512Isa in
// kernels/simd_avx512.h) and instantiated by loco_compress_avx2.cc and
// loco_compress_avx512.cc. Internal to kernels/.
//
// The including file defines LOCO_SIMD_TARGET, the target attribute of its
// ISA, before including this header, and includes it last (after
// simd_avx2.h / simd_avx512.h). Each instantiation is a distinct template
// specialisation, so the two files' copies never meet at link time.
//
// Arithmetic: exactly the binding steps of kernels/loco_compress_cpu.cc
// (payload codes, scales, state codes and scales, the non-finite count and
// error_sq_norm are bit-identical to the portable path; grad_sq_norm, a
// metric, is summed in another lane order). Equivalences it relies on:
// rne(y) by the magic-constant add and subtract equals cvtps2dq under the
// default rounding mode for |y| < 2^22 (always the case,
// kernels/quantize_inl.h); clamping the integer equals clamping the float;
// with the multiply rule no clamp is needed (|x| <= absmax gives |y| <=
// qmax * (1 + 2^-22), which rounds to at most qmax).
//
// Per block, three passes over data in the L1 cache:
//   1. ê from the int8 state, h = g + ê, max|h|, Σ g² (into stack buffers);
//   2. payload codes, packed 32 at a time from the registers, and the new
//      error;
//   3. the new error as int8 codes + scale, and Σ code².
// Every pass works on groups of 32 elements. A call's last block, when it
// is not a multiple of 32 long, is copied into zero-padded buffers first:
// the padding gives code 0 and error 0, which changes no maximum and no
// sum, and only the block's own bytes are copied out.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/loco_compress.h"
#include "kernels/quantize_inl.h"

#ifndef LOCO_SIMD_TARGET
#error "define LOCO_SIMD_TARGET (the ISA's target attribute) before including this header"
#endif
#define LOCO_SIMD_INLINE inline __attribute__((always_inline)) LOCO_SIMD_TARGET

namespace loco::cpu::detail::simd {

inline constexpr size_t kGroup = 32;          // elements per packing group
// Software prefetches, in elements ahead of pass 1's loads: into L1 at
// 2 KiB of gradient, and into L2 at 8 KiB. From memory the hardware
// prefetcher alone left the loop waiting; the L2 prefetches made one
// thread 8-12 % faster at 2^26 elements on a Xeon (0.44-0.49 ns per
// element without them, 0.39-0.45 with), and cost nothing measurable in
// cache. A prefetch past the end of the data is harmless.
inline constexpr size_t kPrefetchAhead = 512;
inline constexpr size_t kL2PrefetchAhead = 2048;

// How a block's values become codes (kernels/quantize_inl.h, QuantizeNearest):
// times the inverse scale (all but degenerate blocks), divided by the scale
// when the inverse is not finite, or all zero when the scale is 0.
enum class Rule { kMultiply, kDivide, kZero };

inline Rule RuleFor(float scale, float inv) {
  return inv != 0.0f ? Rule::kMultiply : scale != 0.0f ? Rule::kDivide : Rule::kZero;
}

template <typename Isa, Rule kRule>
LOCO_SIMD_INLINE typename Isa::I Codes(typename Isa::F x, typename Isa::F scale,
                                       typename Isa::F inv, typename Isa::I lo,
                                       typename Isa::I hi) {
  if constexpr (kRule == Rule::kZero) {
    return Isa::ZeroI();
  } else if constexpr (kRule == Rule::kMultiply) {
    return Isa::RoundToInt(Isa::Mul(x, inv));
  } else {
    return Isa::Clamp(Isa::RoundToInt(Isa::Div(x, scale)), lo, hi);
  }
}

// Pass 1 over `len` (a multiple of kGroup) elements. Returns max|h| as bit
// patterns per lane; sets *squares to the block's g², in lanes. The squares
// go to one accumulator per vector of a group, so that the pass holds no
// chain of dependent 4-cycle multiply-adds for the out-of-order core to
// hide (measured in cache: 0-5 % faster; from memory, no change).
template <typename Isa, CompensationMode kMode>
LOCO_SIMD_INLINE typename Isa::I LoadBlock(const float* g, const int8_t* state_codes,
                                           float state_scale, size_t len, float* h_out,
                                           float* e_out, typename Isa::F* squares) {
  using F = typename Isa::F;
  using I = typename Isa::I;
  constexpr size_t kVectors = kGroup / Isa::kLanes;
  const F s8 = Isa::Splat(state_scale);
  I amax = Isa::ZeroI();
  F sq[kVectors];
  for (size_t v = 0; v < kVectors; ++v) sq[v] = Isa::ZeroF();
  for (size_t k = 0; k < len; k += kGroup) {
    __builtin_prefetch(g + k + kPrefetchAhead);  // a group's 128 bytes: two lines
    __builtin_prefetch(g + k + 16 + kPrefetchAhead);
    __builtin_prefetch(g + k + kL2PrefetchAhead, 0, 2);
    __builtin_prefetch(g + k + 16 + kL2PrefetchAhead, 0, 2);
    if (k % 64 == 0) {
      __builtin_prefetch(state_codes + k + kPrefetchAhead);
      __builtin_prefetch(state_codes + k + kL2PrefetchAhead, 0, 2);
    }
    for (size_t v = 0; v < kVectors; ++v) {
      const size_t i = k + v * Isa::kLanes;
      const F gv = Isa::Load(g + i);
      sq[v] = Isa::SquareAdd(gv, sq[v]);  // a metric (kernels/loco_compress.h)
      const F ehat = Isa::Mul(Isa::ToFloat(Isa::LoadCodes(state_codes + i)), s8);
      const F h = Isa::Add(gv, ehat);
      if constexpr (kMode == CompensationMode::kLoco) Isa::Store(e_out + i, ehat);
      Isa::Store(h_out + i, h);
      amax = Isa::Max(amax, Isa::AbsBits(h));
    }
  }
  *squares = sq[0];
  for (size_t v = 1; v < kVectors; ++v) *squares = Isa::Add(*squares, sq[v]);
  return amax;
}

// Pass 2: the payload codes of the `len` elements of h at `out`, and the
// new error over ê in e. Returns max|e| as bit patterns per lane. (After a reset the error
// is computed and not used.)
template <typename Isa, CompensationMode kMode, int kBits, Rule kRule>
LOCO_SIMD_INLINE typename Isa::I PayloadAndError(const float* h_in, float* e, size_t len,
                                                 float scale, float inv, int qmax, float beta,
                                                 uint8_t* out) {
  using F = typename Isa::F;
  using I = typename Isa::I;
  constexpr size_t kVectors = kGroup / Isa::kLanes;
  const F scale_v = Isa::Splat(scale), inv_v = Isa::Splat(inv);
  const F beta_v = Isa::Splat(beta), one_minus_beta_v = Isa::Splat(1.0f - beta);
  const I lo = Isa::SplatI(-qmax), hi = Isa::SplatI(qmax);
  I emax = Isa::ZeroI();
  for (size_t k = 0; k < len; k += kGroup) {
    I c[kVectors];
    for (size_t v = 0; v < kVectors; ++v) {
      const size_t i = k + v * Isa::kLanes;
      const F h = Isa::Load(h_in + i);
      c[v] = Codes<Isa, kRule>(h, scale_v, inv_v, lo, hi);
      const F r = Isa::Sub(h, Isa::Mul(Isa::ToFloat(c[v]), scale_v));
      F error = r;
      if constexpr (kMode == CompensationMode::kLoco) {
        error = Isa::Add(Isa::Mul(beta_v, Isa::Load(e + i)), Isa::Mul(one_minus_beta_v, r));
      }
      Isa::Store(e + i, error);
      emax = Isa::Max(emax, Isa::AbsBits(error));
    }
    Isa::template StorePacked<kBits>(c, out + k * kBits / 8);
  }
  return emax;
}

// Pass 3: the error e as int8 codes at `state_codes`; returns Σ code² (exact:
// at most 4096 * 127² < 2^31).
template <typename Isa, Rule kRule>
LOCO_SIMD_INLINE int32_t StoreError(const float* e, size_t len, float scale, float inv,
                                    int8_t* state_codes) {
  using F = typename Isa::F;
  using I = typename Isa::I;
  constexpr size_t kVectors = kGroup / Isa::kLanes;
  const F scale_v = Isa::Splat(scale), inv_v = Isa::Splat(inv);
  const I lo = Isa::SplatI(-127), hi = Isa::SplatI(127);
  __m256i code_sq = _mm256_setzero_si256();
  for (size_t k = 0; k < len; k += kGroup) {
    I c[kVectors];
    for (size_t v = 0; v < kVectors; ++v) {
      c[v] = Codes<Isa, kRule>(Isa::Load(e + k + v * Isa::kLanes), scale_v, inv_v, lo, hi);
    }
    const __m256i bytes = Isa::Narrow(c);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(state_codes + k), bytes);
    code_sq = Isa::AddSquares(bytes, code_sq);
  }
  return Codes32::Sum(code_sq);
}

// Rare: zeroes the non-finite h of a block, marks them in bad_marks and
// returns their count; *amax := max|h| over the rest. (Templates, as every
// function here, so that each ISA's file has its own copy.)
template <typename Isa>
LOCO_SIMD_INLINE uint32_t ZeroNonFinite(size_t len, float* h, uint8_t* bad_marks, int32_t* amax) {
  const int32_t exp_bits = static_cast<int32_t>(kExpMask);
  uint32_t bad = 0;
  *amax = 0;
  for (size_t i = 0; i < len; ++i) {
    const int32_t a = static_cast<int32_t>(Bits(h[i]) & kAbsMask);
    bad_marks[i] = a >= exp_bits ? 1 : 0;
    if (a >= exp_bits) {
      h[i] = 0.0f;
      ++bad;
    } else {
      *amax = std::max(*amax, a);
    }
  }
  return bad;
}

// Rare: the new error is 0 where h was not finite or e overflowed; returns
// max|e| over the rest.
template <typename Isa>
LOCO_SIMD_INLINE int32_t ZeroBadErrors(size_t len, bool any_bad, const uint8_t* bad_marks,
                                       float* e) {
  const int32_t exp_bits = static_cast<int32_t>(kExpMask);
  int32_t emax = 0;
  for (size_t i = 0; i < len; ++i) {
    const int32_t a = static_cast<int32_t>(Bits(e[i]) & kAbsMask);
    if (a >= exp_bits || (any_bad && bad_marks[i] != 0)) {
      e[i] = 0.0f;
    } else {
      emax = std::max(emax, a);
    }
  }
  return emax;
}

template <typename Isa, CompensationMode kMode, int kBits>
LOCO_SIMD_INLINE typename Isa::I PayloadAndErrorFor(Rule rule, const float* h, float* e,
                                                    size_t len, float scale, float inv, float beta,
                                                    uint8_t* out) {
  const int qmax = QMax(kBits);
  switch (rule) {
    case Rule::kMultiply:
      return PayloadAndError<Isa, kMode, kBits, Rule::kMultiply>(h, e, len, scale, inv, qmax, beta,
                                                                 out);
    case Rule::kDivide:
      return PayloadAndError<Isa, kMode, kBits, Rule::kDivide>(h, e, len, scale, inv, qmax, beta,
                                                               out);
    default:
      return PayloadAndError<Isa, kMode, kBits, Rule::kZero>(h, e, len, scale, inv, qmax, beta, out);
  }
}

template <typename Isa>
LOCO_SIMD_INLINE int32_t StoreErrorFor(Rule rule, const float* e, size_t len, float scale,
                                       float inv, int8_t* state_codes) {
  switch (rule) {
    case Rule::kMultiply:
      return StoreError<Isa, Rule::kMultiply>(e, len, scale, inv, state_codes);
    case Rule::kDivide:
      return StoreError<Isa, Rule::kDivide>(e, len, scale, inv, state_codes);
    default:
      return StoreError<Isa, Rule::kZero>(e, len, scale, inv, state_codes);
  }
}

// Σ g² over the finite g, in double: the slow path of a metric whose fast
// sum came out non-finite.
inline double FiniteSquares(const float* g, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isfinite(g[i])) sum += static_cast<double>(g[i]) * g[i];
  }
  return sum;
}

// One block in flight: where it is read and written, its buffers in the
// L1 cache, and what its passes found.
struct BlockSlot {
  alignas(64) float h[kMaxBlock];
  alignas(64) float e[kMaxBlock];  // ê on the way in, the new error on the way out
  alignas(64) uint8_t bad[kMaxBlock];
  size_t index = 0;   // the block's index in the call
  size_t begin = 0;   // its first element
  size_t len = 0;     // its elements
  size_t padded = 0;  // len rounded up to kGroup
  const float* g = nullptr;
  const int8_t* state_in = nullptr;
  int8_t* state_out = nullptr;
  uint8_t* payload = nullptr;
  bool any_bad = false;
  int32_t absmax = 0;  // max|h|, then max|e|, as bit patterns
  float scale = 0.0f;
  float inv = 0.0f;
};

// A partial last block, padded with zeros to a multiple of kGroup (only a
// call's last block can be partial).
struct TailBuffers {
  alignas(64) float g[kMaxBlock];
  alignas(64) int8_t state[kMaxBlock];
  alignas(64) uint8_t payload[kMaxBlock];
};

// The call's totals (LocoStats), but for Σ g², which stays in vector lanes.
struct Totals {
  uint64_t nonfinite = 0;
  double error_sq = 0.0;
};

// Points `slot` at block `index` (at element b0): in place, except a
// partial last block, which goes through the zero-padded tail buffers
// (copied in here, out by FinishPayload and FinishState).
template <int kBits>
inline void PlaceBlock(const float* g, size_t n, size_t index, size_t block, ErrorStateView state,
                       uint8_t* codes, TailBuffers& tail, BlockSlot& slot) {
  const size_t b0 = index * block;
  slot.index = index;
  slot.begin = b0;
  slot.len = std::min(block, n - b0);
  slot.padded = (slot.len + kGroup - 1) / kGroup * kGroup;
  slot.g = g + b0;
  slot.state_in = slot.state_out = state.codes + b0;
  slot.payload = codes + b0 * kBits / 8;  // blocks are multiples of 32: whole bytes
  if (slot.padded != slot.len) {
    std::memcpy(tail.g, slot.g, slot.len * sizeof(float));
    std::fill(tail.g + slot.len, tail.g + slot.padded, 0.0f);
    std::memcpy(tail.state, slot.state_in, slot.len);
    std::fill(tail.state + slot.len, tail.state + slot.padded, int8_t{0});
    slot.g = tail.g;
    slot.state_in = slot.state_out = tail.state;
    slot.payload = tail.payload;
  }
}

// Pass 1 of a placed block, and its payload scale. A non-finite g, or a
// square past FLT_MAX, makes the metric's total non-finite; only then is
// it summed again, at the end of the call.
template <typename Isa, CompensationMode kMode, int kBits>
LOCO_SIMD_INLINE void StartBlock(ErrorStateView state, BlockSlot& slot, Totals& totals,
                                 typename Isa::D* grad_sq) {
  typename Isa::F squares = Isa::ZeroF();
  slot.absmax = Isa::ReduceMax(LoadBlock<Isa, kMode>(
      slot.g, slot.state_in, state.scales[slot.index], slot.padded, slot.h, slot.e, &squares));
  *grad_sq = Isa::AddToDouble(squares, *grad_sq);
  slot.any_bad = slot.absmax >= static_cast<int32_t>(kExpMask);
  if (slot.any_bad) totals.nonfinite += ZeroNonFinite<Isa>(slot.len, slot.h, slot.bad, &slot.absmax);
  slot.scale = ScaleFromAbsMax(static_cast<uint32_t>(slot.absmax), QMax(kBits));
  slot.inv = InverseFromAbsMax(static_cast<uint32_t>(slot.absmax), QMax(kBits));
}

// Pass 2 of a started block: its payload and scale, and the scale of its
// new error (after a reset: a zero state instead).
template <typename Isa, CompensationMode kMode, int kBits>
LOCO_SIMD_INLINE void FinishPayload(float beta, bool reset, ErrorStateView state, uint8_t* codes,
                                    float* scales, const TailBuffers& tail, BlockSlot& slot) {
  slot.absmax = Isa::ReduceMax(PayloadAndErrorFor<Isa, kMode, kBits>(
      RuleFor(slot.scale, slot.inv), slot.h, slot.e, slot.padded, slot.scale, slot.inv, beta,
      slot.payload));
  if (slot.payload == tail.payload) {
    std::memcpy(codes + slot.begin * kBits / 8, tail.payload, PackedBytes(slot.len, kBits));
  }
  scales[slot.index] = slot.scale;
  if (reset) {
    std::fill(state.codes + slot.begin, state.codes + slot.begin + slot.len, int8_t{0});
    state.scales[slot.index] = 0.0f;
    return;
  }
  if (slot.any_bad || slot.absmax >= static_cast<int32_t>(kExpMask)) {
    slot.absmax = ZeroBadErrors<Isa>(slot.len, slot.any_bad, slot.bad, slot.e);
  }
  slot.scale = ScaleFromAbsMax(static_cast<uint32_t>(slot.absmax), 127);
  slot.inv = InverseFromAbsMax(static_cast<uint32_t>(slot.absmax), 127);
}

// Pass 3 of a block whose payload is done: its new error state.
template <typename Isa>
LOCO_SIMD_INLINE void FinishState(ErrorStateView state, const TailBuffers& tail,
                                  const BlockSlot& slot, Totals& totals) {
  const int32_t code_sq = StoreErrorFor<Isa>(RuleFor(slot.scale, slot.inv), slot.e, slot.padded,
                                             slot.scale, slot.inv, slot.state_out);
  if (slot.state_out == tail.state) {
    std::memcpy(state.codes + slot.begin, tail.state, slot.len);
  }
  state.scales[slot.index] = slot.scale;
  const double s8 = slot.scale;
  totals.error_sq += s8 * s8 * static_cast<double>(code_sq);
}

// The block loop, software-pipelined: step k starts block k, finishes the
// payload of block k - 1 and the state of block k - 2. A block's passes
// wait on its own reductions and divisions (max|h| before the payload,
// max|e| before the state); between them the core works on the other two
// blocks instead of stalling, and the loads from memory (all in pass 1)
// stay evenly spread. Stack: three slots and the tail buffers, about
// 132 KiB (sized for the largest block, 4096). The slots rotate through
// three pointers rather than k % 3: at 128-element blocks the loop's own
// bookkeeping is a measurable part of the call (3 % on a Zen 3).
template <typename Isa, CompensationMode kMode, int kBits>
LOCO_SIMD_TARGET void CompressBlocks(const float* g, size_t n, bool reset, const LocoParams& p,
                                     ErrorStateView state, uint8_t* codes, float* scales,
                                     LocoStats* stats) {
  BlockSlot slots[3];
  BlockSlot* starting = &slots[0];  // block k
  BlockSlot* paying = &slots[2];    // block k - 1
  BlockSlot* storing = &slots[1];   // block k - 2
  TailBuffers tail;
  Totals totals;
  typename Isa::D grad_sq = Isa::ZeroD();
  const size_t block = static_cast<size_t>(p.block_size);
  const size_t blocks = NumBlocks(n, p.block_size);
  for (size_t k = 0; k < blocks + 2; ++k) {
    if (k < blocks) {
      PlaceBlock<kBits>(g, n, k, block, state, codes, tail, *starting);
      StartBlock<Isa, kMode, kBits>(state, *starting, totals, &grad_sq);
    }
    if (k >= 1 && k - 1 < blocks) {
      FinishPayload<Isa, kMode, kBits>(p.beta, reset, state, codes, scales, tail, *paying);
    }
    if (!reset && k >= 2) FinishState<Isa>(state, tail, *storing, totals);
    BlockSlot* const done = storing;  // the next step's block k + 1 takes its slot
    storing = paying;
    paying = starting;
    starting = done;
  }
  if (stats != nullptr) {
    double grad_sq_total = Isa::ReduceD(grad_sq);
    if (!std::isfinite(grad_sq_total)) grad_sq_total = FiniteSquares(g, n);
    stats->nonfinite = totals.nonfinite;
    stats->error_sq_norm = totals.error_sq;
    stats->grad_sq_norm = grad_sq_total;
  }
}

// cpu::LocoCompress for the cases the vector paths handle (kEf or kLoco,
// an 8-bit state, nearest rounding). Preconditions as LocoCompressPortable.
template <typename Isa>
LOCO_SIMD_TARGET void LocoCompressVector(const float* g, size_t n, bool reset, const LocoParams& p,
                                         ErrorStateView state, uint8_t* codes, float* scales,
                                         LocoStats* stats) {
  constexpr CompensationMode kLoco = CompensationMode::kLoco, kEf = CompensationMode::kEf;
  const bool loco = p.mode == kLoco;
  switch (p.bits) {
    case 2:
      (loco ? CompressBlocks<Isa, kLoco, 2> : CompressBlocks<Isa, kEf, 2>)(g, n, reset, p, state,
                                                                           codes, scales, stats);
      break;
    case 4:
      (loco ? CompressBlocks<Isa, kLoco, 4> : CompressBlocks<Isa, kEf, 4>)(g, n, reset, p, state,
                                                                           codes, scales, stats);
      break;
    default:
      (loco ? CompressBlocks<Isa, kLoco, 8> : CompressBlocks<Isa, kEf, 8>)(g, n, reset, p, state,
                                                                           codes, scales, stats);
      break;
  }
}

}  // namespace loco::cpu::detail::simd

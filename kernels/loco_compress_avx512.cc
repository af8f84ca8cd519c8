// AVX-512 path of cpu::LocoCompress (contract: kernels/loco_compress_avx512.h;
// the arithmetic it must reproduce: kernels/loco_compress_cpu.cc).
//
// The same three steps per block as the portable path, on 16 lanes:
//   1. ê from the int8 state, h = g + ê, max|h|, Σ g² (into stack buffers);
//   2. payload codes, packed straight from the registers, and the new error;
//   3. the new error as int8 codes + scale, and Σ code².
// Equivalences it relies on: rne(y) by the magic-constant add and subtract
// equals vcvtps2dq under the default rounding mode for |y| < 2^22 (always
// the case, kernels/quantize_inl.h), and clamping the integer equals
// clamping the float. A block's last vector is masked: its missing lanes
// load as 0, give code 0 and error 0, and are never stored.
#include "kernels/loco_compress_avx512.h"

#include <algorithm>
#include <cmath>

#include "kernels/quantize_inl.h"
// Last: its pragmas hold to the end of the file.
#include "kernels/avx512_target.h"

#if LOCO_HAVE_AVX512_TARGET
#define LOCO_HAVE_AVX512_PATH 1
#define LOCO_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define LOCO_AVX512_INLINE [[gnu::always_inline]] inline LOCO_AVX512
#endif

namespace loco::cpu::detail {

bool Avx512Handles(const LocoParams& p) {
  return p.mode != CompensationMode::kNaive && p.error_bits == 8 &&
         p.rounding == Rounding::kNearest;
}

#if LOCO_HAVE_AVX512_PATH

bool HaveAvx512() {
  // A fact about the machine, fixed for the process's life.
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("fma");
  }();
  return have;
}

namespace {

constexpr size_t kLanes16 = 16;
constexpr size_t kPrefetchAhead16 = 512;  // elements, as in the portable path

struct Buffers512 {
  alignas(64) float h[kMaxBlock];
  alignas(64) float e[kMaxBlock];  // ê on the way in, the new error on the way out
  alignas(64) uint8_t bad[kMaxBlock];
};

// How a block's values become codes (kernels/quantize_inl.h, QuantizeNearest):
// times the inverse scale (all but degenerate blocks), divided by the scale
// when the inverse is not finite, or all zero when the scale is 0.
enum class Rule { kMultiply, kDivide, kZero };

LOCO_AVX512_INLINE Rule RuleFor(float scale, float inv) {
  return inv != 0.0f ? Rule::kMultiply : scale != 0.0f ? Rule::kDivide : Rule::kZero;
}

// clamp(rne(y), lo, hi) of y = x * inv or x / scale, or 0 (Rule). With
// the multiply no clamp is needed: |x| <= absmax gives |y| <= qmax * (1 +
// 2^-22) (kernels/quantize_inl.h), which rounds to at most qmax.
template <Rule kRule>
LOCO_AVX512_INLINE __m512i Codes16(__m512 x, __m512 scale_v, __m512 inv_v, __m512i lo,
                                   __m512i hi) {
  if constexpr (kRule == Rule::kZero) {
    return _mm512_setzero_si512();
  } else if constexpr (kRule == Rule::kMultiply) {
    return _mm512_cvtps_epi32(_mm512_mul_ps(x, inv_v));
  } else {
    return _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_div_ps(x, scale_v)), lo),
                            hi);
  }
}

// Stores the codes of lanes [0, lanes) packed at `bits` bits (the layout of
// PackCodes: element i at bit (i * bits) % 8 of byte i * bits / 8), writing
// exactly (lanes * bits + 7) / 8 bytes.
template <int kBits>
LOCO_AVX512_INLINE void PackStore16(__m512i c, size_t lanes, uint8_t* out) {
  if constexpr (kBits == 8) {
    _mm512_mask_cvtepi32_storeu_epi8(out, static_cast<__mmask16>((1u << lanes) - 1u), c);
  } else if constexpr (kBits == 4) {
    // Each 64-bit lane holds codes 2k and 2k+1: shifting it right by 28
    // puts code 2k+1's nibble just above code 2k's.
    const __m512i t = _mm512_and_si512(c, _mm512_set1_epi32(0xF));
    const __m512i u = _mm512_or_si512(t, _mm512_srli_epi64(t, 28));
    _mm512_mask_cvtepi64_storeu_epi8(out, static_cast<__mmask8>((1u << ((lanes + 1) / 2)) - 1u), u);
  } else {
    const __m512i t = _mm512_and_si512(c, _mm512_set1_epi32(0x3));
    const __m256i pairs = _mm512_cvtepi64_epi32(_mm512_or_si512(t, _mm512_srli_epi64(t, 30)));
    const __m256i quads = _mm256_or_si256(pairs, _mm256_srli_epi64(pairs, 28));
    _mm256_mask_cvtepi64_storeu_epi8(out, static_cast<__mmask8>((1u << ((lanes + 3) / 4)) - 1u),
                                     quads);
  }
}

// Step 1 for the lanes of `m`, at g and code8.
LOCO_AVX512_INLINE void Load16(const float* g, const int8_t* code8, __m512 s8, __mmask16 m,
                               float* h_out, float* e_out, __m512i* amax, __m512* squares) {
  const __m512 gv = _mm512_maskz_loadu_ps(m, g);
  const __m512i c = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, code8));
  const __m512 ehat = _mm512_mul_ps(_mm512_cvtepi32_ps(c), s8);
  *squares = _mm512_fmadd_ps(gv, gv, *squares);  // a metric (see the header)
  const __m512 h = _mm512_add_ps(gv, ehat);
  _mm512_store_ps(e_out, ehat);
  _mm512_store_ps(h_out, h);
  *amax = _mm512_max_epi32(*amax, _mm512_and_si512(_mm512_castps_si512(h),
                                                   _mm512_set1_epi32(static_cast<int>(kAbsMask))));
}

// Step 2 for the `lanes` elements at offset i of the block.
template <CompensationMode kMode, int kBits, Rule kRule>
LOCO_AVX512_INLINE void PayloadAndError16(Buffers512& buf, size_t i, size_t lanes, bool track,
                                          __m512 s_v, __m512 inv_v, __m512i lo, __m512i hi,
                                          __m512 beta_v, __m512 omb_v, uint8_t* out,
                                          __m512i* emax_v) {
  const __m512 h = _mm512_load_ps(buf.h + i);
  const __m512i c = Codes16<kRule>(h, s_v, inv_v, lo, hi);
  PackStore16<kBits>(c, lanes, out + i * kBits / 8);
  if (!track) return;
  const __m512 r = _mm512_sub_ps(h, _mm512_mul_ps(_mm512_cvtepi32_ps(c), s_v));
  __m512 e = r;
  if constexpr (kMode == CompensationMode::kLoco) {
    e = _mm512_add_ps(_mm512_mul_ps(beta_v, _mm512_load_ps(buf.e + i)), _mm512_mul_ps(omb_v, r));
  }
  _mm512_store_ps(buf.e + i, e);
  *emax_v = _mm512_max_epi32(
      *emax_v, _mm512_and_si512(_mm512_castps_si512(e),
                                _mm512_set1_epi32(static_cast<int>(kAbsMask))));
}

// Step 2 over one block: packs the payload codes at `out` and, when
// `track`, writes the new error into buf.e. Returns max|e| bit patterns per
// lane (0 when !track).
template <CompensationMode kMode, int kBits, Rule kRule>
LOCO_AVX512_INLINE __m512i PayloadAndError(Buffers512& buf, size_t len, bool track, __m512 s_v,
                                           __m512 inv_v, __m512i lo, __m512i hi, __m512 beta_v,
                                           __m512 omb_v, uint8_t* out) {
  __m512i emax_v = _mm512_setzero_si512();
  const size_t full = len - len % kLanes16;
  for (size_t i = 0; i < full; i += kLanes16) {
    PayloadAndError16<kMode, kBits, kRule>(buf, i, kLanes16, track, s_v, inv_v, lo, hi, beta_v,
                                           omb_v, out, &emax_v);
  }
  if (full < len) {
    PayloadAndError16<kMode, kBits, kRule>(buf, full, len - full, track, s_v, inv_v, lo, hi,
                                           beta_v, omb_v, out, &emax_v);
  }
  return emax_v;
}

// Step 3 over one block: the error's int8 codes into `state_codes`; returns
// Σ code² over the block. Each lane sums at most 256 squares of at most
// 127², below 2^24, so the float multiply-adds are exact.
template <Rule kRule>
LOCO_AVX512_INLINE int32_t StoreError16(const Buffers512& buf, size_t len, size_t full,
                                        __mmask16 rest_mask, __m512 s8_v, __m512 inv8_v,
                                        __m512i lo, __m512i hi, int8_t* state_codes) {
  __m512 code_sq = _mm512_setzero_ps();
  for (size_t i = 0; i < len; i += kLanes16) {
    const __m512i c = Codes16<kRule>(_mm512_load_ps(buf.e + i), s8_v, inv8_v, lo, hi);
    const __mmask16 m = i < full ? static_cast<__mmask16>(0xFFFF) : rest_mask;
    _mm512_mask_cvtepi32_storeu_epi8(state_codes + i, m, c);
    const __m512 cf = _mm512_cvtepi32_ps(c);
    code_sq = _mm512_fmadd_ps(cf, cf, code_sq);
  }
  return _mm512_reduce_add_epi32(_mm512_cvtps_epi32(code_sq));
}

template <CompensationMode kMode, int kBits>
LOCO_AVX512 void CompressBlocks512(const float* g, size_t n, bool reset, const LocoParams& p,
                                   ErrorStateView state, uint8_t* codes, float* scales,
                                   LocoStats* stats) {
  Buffers512 buf;
  const size_t block = static_cast<size_t>(p.block_size);
  const int qmax = QMax(kBits);
  const __m512i qlo = _mm512_set1_epi32(-qmax), qhi = _mm512_set1_epi32(qmax);
  const __m512i elo = _mm512_set1_epi32(-127), ehi = _mm512_set1_epi32(127);
  const float beta = p.beta, one_minus_beta = 1.0f - beta;
  const __m512 beta_v = _mm512_set1_ps(beta), omb_v = _mm512_set1_ps(one_minus_beta);
  const int32_t exp_bits = static_cast<int32_t>(kExpMask);
  uint64_t nonfinite = 0;
  double sq = 0.0;
  __m512d grad_sq_v = _mm512_setzero_pd();
  size_t blk = 0;
  for (size_t b0 = 0; b0 < n; b0 += block, ++blk) {
    const size_t len = std::min(block, n - b0);
    const size_t full = len - len % kLanes16;
    const size_t rest = len - full;
    const __mmask16 rest_mask = static_cast<__mmask16>((1u << rest) - 1u);
    const float* gb = g + b0;
    const int8_t* cb = state.codes + b0;

    // 1. ê, h, max|h|, Σ g².
    const __m512 s8_old = _mm512_set1_ps(state.scales[blk]);
    __m512i amax_v = _mm512_setzero_si512();
    __m512 squares = _mm512_setzero_ps();
    for (size_t i = 0; i < full; i += kLanes16) {
      __builtin_prefetch(gb + i + kPrefetchAhead16);
      __builtin_prefetch(cb + i + kPrefetchAhead16);
      Load16(gb + i, cb + i, s8_old, 0xFFFF, buf.h + i, buf.e + i, &amax_v, &squares);
    }
    if (rest != 0) {
      Load16(gb + full, cb + full, s8_old, rest_mask, buf.h + full, buf.e + full, &amax_v,
             &squares);
    }
    // The block's float squares join 8 double lanes: no serial chain of
    // scalar adds per block. A non-finite g, or a square past FLT_MAX,
    // makes the total non-finite; only then is it summed again, below.
    grad_sq_v = _mm512_add_pd(grad_sq_v, _mm512_cvtps_pd(_mm512_castps512_ps256(squares)));
    grad_sq_v = _mm512_add_pd(grad_sq_v, _mm512_cvtps_pd(_mm512_extractf32x8_ps(squares, 1)));
    int32_t amax = _mm512_reduce_max_epi32(amax_v);
    const bool any_bad = amax >= exp_bits;
    if (any_bad) {
      // Rare: a non-finite h is counted, becomes 0, and its error 0.
      amax = 0;
      for (size_t i = 0; i < len; ++i) {
        const int32_t a = static_cast<int32_t>(Bits(buf.h[i]) & kAbsMask);
        buf.bad[i] = a >= exp_bits ? 1 : 0;
        if (a >= exp_bits) {
          buf.h[i] = 0.0f;
          ++nonfinite;
        } else {
          amax = std::max(amax, a);
        }
      }
    }

    // 2. Payload codes and the new error.
    const float s = ScaleFromAbsMax(static_cast<uint32_t>(amax), qmax);
    const float inv = InverseFromAbsMax(static_cast<uint32_t>(amax), qmax);
    const __m512 s_v = _mm512_set1_ps(s), inv_v = _mm512_set1_ps(inv);
    const bool track = !reset;
    uint8_t* out = codes + b0 * kBits / 8;
    __m512i emax_v;
    switch (RuleFor(s, inv)) {
      case Rule::kMultiply:
        emax_v = PayloadAndError<kMode, kBits, Rule::kMultiply>(buf, len, track, s_v, inv_v, qlo,
                                                         qhi, beta_v, omb_v, out);
        break;
      case Rule::kDivide:
        emax_v = PayloadAndError<kMode, kBits, Rule::kDivide>(buf, len, track, s_v, inv_v, qlo, qhi,
                                                       beta_v, omb_v, out);
        break;
      default:
        emax_v = PayloadAndError<kMode, kBits, Rule::kZero>(buf, len, track, s_v, inv_v, qlo, qhi,
                                                     beta_v, omb_v, out);
        break;
    }
    scales[blk] = s;
    if (!track) {
      std::fill(state.codes + b0, state.codes + b0 + len, int8_t{0});
      state.scales[blk] = 0.0f;
      continue;
    }
    int32_t emax = _mm512_reduce_max_epi32(emax_v);
    if (any_bad || emax >= exp_bits) {
      // Rare: an element whose h was not finite, or an e that overflowed.
      emax = 0;
      for (size_t i = 0; i < len; ++i) {
        const int32_t a = static_cast<int32_t>(Bits(buf.e[i]) & kAbsMask);
        if (a >= exp_bits || (any_bad && buf.bad[i] != 0)) {
          buf.e[i] = 0.0f;
        } else {
          emax = std::max(emax, a);
        }
      }
    }

    // 3. The new error as int8 codes and a scale.
    const float s8 = ScaleFromAbsMax(static_cast<uint32_t>(emax), 127);
    const float inv8 = InverseFromAbsMax(static_cast<uint32_t>(emax), 127);
    const __m512 s8_v = _mm512_set1_ps(s8), inv8_v = _mm512_set1_ps(inv8);
    int8_t* state_codes = state.codes + b0;
    int32_t code_sq;
    switch (RuleFor(s8, inv8)) {
      case Rule::kMultiply:
        code_sq = StoreError16<Rule::kMultiply>(buf, len, full, rest_mask, s8_v, inv8_v, elo, ehi,
                                                state_codes);
        break;
      case Rule::kDivide:
        code_sq = StoreError16<Rule::kDivide>(buf, len, full, rest_mask, s8_v, inv8_v, elo, ehi,
                                              state_codes);
        break;
      default:
        code_sq = StoreError16<Rule::kZero>(buf, len, full, rest_mask, s8_v, inv8_v, elo, ehi,
                                            state_codes);
        break;
    }
    state.scales[blk] = s8;
    const double s8d = s8;
    sq += s8d * s8d * static_cast<double>(code_sq);
  }
  if (stats != nullptr) {
    double grad_sq = _mm512_reduce_add_pd(grad_sq_v);
    if (!std::isfinite(grad_sq)) {
      grad_sq = 0.0;
      for (size_t i = 0; i < n; ++i) {
        if (std::isfinite(g[i])) grad_sq += static_cast<double>(g[i]) * g[i];
      }
    }
    stats->nonfinite = nonfinite;
    stats->error_sq_norm = sq;
    stats->grad_sq_norm = grad_sq;
  }
}

}  // namespace

void LocoCompressAvx512(const float* g, size_t n, bool reset, const LocoParams& p,
                        ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats) {
  const bool loco = p.mode == CompensationMode::kLoco;
  constexpr CompensationMode kLoco = CompensationMode::kLoco, kEf = CompensationMode::kEf;
  switch (p.bits) {
    case 2:
      (loco ? CompressBlocks512<kLoco, 2> : CompressBlocks512<kEf, 2>)(g, n, reset, p, state,
                                                                       codes, scales, stats);
      break;
    case 4:
      (loco ? CompressBlocks512<kLoco, 4> : CompressBlocks512<kEf, 4>)(g, n, reset, p, state,
                                                                       codes, scales, stats);
      break;
    default:
      (loco ? CompressBlocks512<kLoco, 8> : CompressBlocks512<kEf, 8>)(g, n, reset, p, state,
                                                                       codes, scales, stats);
      break;
  }
}

#else  // no AVX-512 path on this platform

bool HaveAvx512() { return false; }

void LocoCompressAvx512(const float* g, size_t n, bool reset, const LocoParams& p,
                        ErrorStateView state, uint8_t* codes, float* scales, LocoStats* stats) {
  LocoCompressPortable(g, n, reset, p, state, codes, scales, stats);
}

#endif

}  // namespace loco::cpu::detail

// The AVX2 operations of the vector kernels (8 float lanes), and the
// operations on 32 int8 codes in one 256-bit register that the AVX2 and
// AVX-512 instantiations share. Internal to kernels/; see
// kernels/loco_compress_simd_inl.h for the kernel written over them.
//
// Every function is force-inlined and compiled for AVX2 + FMA, so it may
// only be called from a function compiled for a superset (the vector
// paths' entry points, chosen at run time on CPUs that have it). Include
// after every other header (kernels/avx512_target.h's pragmas).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/avx512_target.h"

#if LOCO_HAVE_AVX512_TARGET
#define LOCO_AVX2_INLINE inline __attribute__((always_inline, target("avx2,fma")))

namespace loco::cpu::detail {

// 32 int8 codes, element i in byte i of one __m256i.
struct Codes32 {
  // Stores the 32 codes packed at kBits bits (the layout of PackCodes in
  // kernels/quantize_inl.h): 4 * kBits bytes at `out`.
  template <int kBits>
  static LOCO_AVX2_INLINE void StorePacked(__m256i codes, uint8_t* out) {
    if constexpr (kBits == 8) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), codes);
    } else if constexpr (kBits == 4) {
      // 16-bit word j holds codes 2j (low byte) and 2j+1 (high byte).
      const __m256i low = _mm256_and_si256(codes, _mm256_set1_epi16(0x000F));
      const __m256i high = _mm256_and_si256(_mm256_srli_epi16(codes, 4), _mm256_set1_epi16(0x00F0));
      const __m256i words = _mm256_or_si256(low, high);  // each <= 0xFF: packus keeps it
      const __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words),
                                             _mm256_extracti128_si256(words, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), bytes);
    } else {
      // 32-bit word j holds codes 4j .. 4j+3, one per byte.
      const __m256i f0 = _mm256_and_si256(codes, _mm256_set1_epi32(0x3));
      const __m256i f1 = _mm256_and_si256(_mm256_srli_epi32(codes, 6), _mm256_set1_epi32(0xC));
      const __m256i f2 = _mm256_and_si256(_mm256_srli_epi32(codes, 12), _mm256_set1_epi32(0x30));
      const __m256i f3 = _mm256_and_si256(_mm256_srli_epi32(codes, 18), _mm256_set1_epi32(0xC0));
      const __m256i words = _mm256_or_si256(_mm256_or_si256(f0, f1), _mm256_or_si256(f2, f3));
      // The low byte of each word: bytes 0..3 of each 128-bit half.
      const __m256i low_bytes = _mm256_shuffle_epi8(
          words, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0,
                                  4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
      const __m128i bytes = _mm_unpacklo_epi32(_mm256_castsi256_si128(low_bytes),
                                               _mm256_extracti128_si256(low_bytes, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out), bytes);
    }
  }

  // acc + Σ code² in 8 int32 lanes (each code in [-127, 127]: the 16-bit
  // pair sums of vpmaddubsw stay below 2^15).
  static LOCO_AVX2_INLINE __m256i AddSquares(__m256i codes, __m256i acc) {
    const __m256i magnitude = _mm256_abs_epi8(codes);
    const __m256i pairs = _mm256_maddubs_epi16(magnitude, magnitude);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }

  static LOCO_AVX2_INLINE int32_t Sum(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
  }
};

// 8 lanes of AVX2. F: floats; I: int32 (codes, or float bit patterns);
// D: the double accumulator of a metric.
struct Avx2Isa {
  static constexpr size_t kLanes = 8;
  using F = __m256;
  using I = __m256i;
  using D = __m256d;

  static LOCO_AVX2_INLINE F Load(const float* p) { return _mm256_loadu_ps(p); }
  static LOCO_AVX2_INLINE void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static LOCO_AVX2_INLINE F Splat(float x) { return _mm256_set1_ps(x); }
  static LOCO_AVX2_INLINE I SplatI(int32_t x) { return _mm256_set1_epi32(x); }
  static LOCO_AVX2_INLINE I ZeroI() { return _mm256_setzero_si256(); }
  static LOCO_AVX2_INLINE F ZeroF() { return _mm256_setzero_ps(); }
  static LOCO_AVX2_INLINE D ZeroD() { return _mm256_setzero_pd(); }
  static LOCO_AVX2_INLINE F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static LOCO_AVX2_INLINE F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static LOCO_AVX2_INLINE F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static LOCO_AVX2_INLINE F Div(F a, F b) { return _mm256_div_ps(a, b); }
  // a * a + acc, fused: only for metrics, never for the binding arithmetic.
  static LOCO_AVX2_INLINE F SquareAdd(F a, F acc) { return _mm256_fmadd_ps(a, a, acc); }
  // kLanes int8 codes at p, sign-extended.
  static LOCO_AVX2_INLINE I LoadCodes(const int8_t* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static LOCO_AVX2_INLINE F ToFloat(I c) { return _mm256_cvtepi32_ps(c); }
  // rne(x) under the default rounding mode (the caller keeps |x| < 2^31).
  static LOCO_AVX2_INLINE I RoundToInt(F x) { return _mm256_cvtps_epi32(x); }
  static LOCO_AVX2_INLINE I Clamp(I c, I lo, I hi) {
    return _mm256_min_epi32(_mm256_max_epi32(c, lo), hi);
  }
  // |x| as a bit pattern: ordered like |x| for finite x, above every finite
  // value for Inf and NaN.
  static LOCO_AVX2_INLINE I AbsBits(F x) {
    return _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7FFFFFFF));
  }
  static LOCO_AVX2_INLINE I Max(I a, I b) { return _mm256_max_epi32(a, b); }
  static LOCO_AVX2_INLINE int32_t ReduceMax(I v) {
    __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4E));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xB1));
    return _mm_cvtsi128_si32(m);
  }
  // acc + the float lanes of v, widened to double.
  static LOCO_AVX2_INLINE D AddToDouble(F v, D acc) {
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  static LOCO_AVX2_INLINE double ReduceD(D v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
  }

  // 32 / kLanes vectors of codes in [-128, 127] as 32 int8, in order.
  static LOCO_AVX2_INLINE __m256i Narrow(const I* c) {
    // packs interleaves the 128-bit halves: dword k of `bytes` holds codes
    // 4k..4k+3 of c[k % 4] (first half) or c[k % 4] + 4 (second half).
    const __m256i bytes =
        _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
    return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  }
  // 32 codes (32 / kLanes vectors) packed at kBits bits into out.
  template <int kBits>
  static LOCO_AVX2_INLINE void StorePacked(const I* c, uint8_t* out) {
    if constexpr (kBits == 4) {
      StorePacked4(c, out);
    } else {
      Codes32::StorePacked<kBits>(Narrow(c), out);
    }
  }
  // The 4-bit case without Narrow's cross-half permutation: the code pairs
  // are joined within each half, and the halves' 2-byte pieces interleaved
  // once at the end. vpmaddubsw joins a pair in one instruction, (code 2j
  // & 15) + 16 * (code 2j+1 & 15); the sum is at most 255. 7 operations
  // instead of 10, and no vpermd (two micro-ops on Zen 3): 2-5 % of the
  // compress call on a Zen 3 (bench/README.md).
  static LOCO_AVX2_INLINE void StorePacked4(const I* c, uint8_t* out) {
    // Dword k of half h: codes 4k..4k+3 of c[k] (h = 0) or of c[k] + 4 (h = 1).
    const __m256i bytes =
        _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_and_si256(bytes, _mm256_set1_epi8(0x0F)),
                                               _mm256_set1_epi16(0x1001));
    // Bytes 0..7 of each half: the pairs of c[0..3]'s low (h = 0) or high
    // (h = 1) four codes, two bytes per vector.
    const __m256i packed = _mm256_packus_epi16(pairs, pairs);
    const __m128i in_order =
        _mm_unpacklo_epi16(_mm256_castsi256_si128(packed), _mm256_extracti128_si256(packed, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), in_order);
  }
  static LOCO_AVX2_INLINE __m256i AddSquares(__m256i codes, __m256i acc) {
    return Codes32::AddSquares(codes, acc);
  }
};

}  // namespace loco::cpu::detail

#endif  // LOCO_HAVE_AVX512_TARGET

// The AVX-512 operations of the vector kernels: 16 float lanes, the same
// interface as Avx2Isa (kernels/simd_avx2.h), whose 32-code operations
// (Codes32) it shares. Internal to kernels/.
//
// Every function is force-inlined and compiled for AVX-512 F/BW/VL/DQ +
// FMA, so it may only be called from a function compiled for them (chosen
// at run time on CPUs that have them). Include after every other header.
#pragma once

#include "kernels/simd_avx2.h"

#if LOCO_HAVE_AVX512_TARGET
#define LOCO_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define LOCO_AVX512_INLINE inline __attribute__((always_inline)) LOCO_AVX512_TARGET

namespace loco::cpu::detail {

struct Avx512Isa {
  static constexpr size_t kLanes = 16;
  using F = __m512;
  using I = __m512i;
  using D = __m512d;

  static LOCO_AVX512_INLINE F Load(const float* p) { return _mm512_loadu_ps(p); }
  static LOCO_AVX512_INLINE void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static LOCO_AVX512_INLINE F Splat(float x) { return _mm512_set1_ps(x); }
  static LOCO_AVX512_INLINE I SplatI(int32_t x) { return _mm512_set1_epi32(x); }
  static LOCO_AVX512_INLINE I ZeroI() { return _mm512_setzero_si512(); }
  static LOCO_AVX512_INLINE F ZeroF() { return _mm512_setzero_ps(); }
  static LOCO_AVX512_INLINE D ZeroD() { return _mm512_setzero_pd(); }
  static LOCO_AVX512_INLINE F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static LOCO_AVX512_INLINE F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static LOCO_AVX512_INLINE F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static LOCO_AVX512_INLINE F Div(F a, F b) { return _mm512_div_ps(a, b); }
  // a * a + acc, fused: only for metrics, never for the binding arithmetic.
  static LOCO_AVX512_INLINE F SquareAdd(F a, F acc) { return _mm512_fmadd_ps(a, a, acc); }
  static LOCO_AVX512_INLINE I LoadCodes(const int8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static LOCO_AVX512_INLINE F ToFloat(I c) { return _mm512_cvtepi32_ps(c); }
  static LOCO_AVX512_INLINE I RoundToInt(F x) { return _mm512_cvtps_epi32(x); }
  static LOCO_AVX512_INLINE I Clamp(I c, I lo, I hi) {
    return _mm512_min_epi32(_mm512_max_epi32(c, lo), hi);
  }
  static LOCO_AVX512_INLINE I AbsBits(F x) {
    return _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF));
  }
  static LOCO_AVX512_INLINE I Max(I a, I b) { return _mm512_max_epi32(a, b); }
  static LOCO_AVX512_INLINE int32_t ReduceMax(I v) { return _mm512_reduce_max_epi32(v); }
  static LOCO_AVX512_INLINE D AddToDouble(F v, D acc) {
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    return _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
  }
  static LOCO_AVX512_INLINE double ReduceD(D v) { return _mm512_reduce_add_pd(v); }

  // 2 vectors of codes in [-128, 127] as 32 int8, in order.
  static LOCO_AVX512_INLINE __m256i Narrow(const I* c) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(c[0])),
                                   _mm512_cvtepi32_epi8(c[1]), 1);
  }
  // 32 codes (2 vectors) packed at kBits bits into out.
  template <int kBits>
  static LOCO_AVX512_INLINE void StorePacked(const I* c, uint8_t* out) {
    Codes32::StorePacked<kBits>(Narrow(c), out);
  }
  static LOCO_AVX512_INLINE __m256i AddSquares(__m256i codes, __m256i acc) {
    return Codes32::AddSquares(codes, acc);
  }
};

// Avx512Isa at the Ice Lake level (AVX-512 VBMI and VNNI; Ice Lake and
// later Xeons, Zen 4), where three steps take fewer micro-ops:
//   - Narrow is one vpermt2b picking the low byte of each lane, instead of
//     two vpmovdb (two micro-ops each) and an insert. The low byte is the
//     saturated one for every code the kernel narrows (all in [-128, 127]);
//   - 4-bit StorePacked joins each pair of lanes within its 64-bit word
//     (a shift and a vpternlogq) and picks the 16 bytes with one vpermt2b,
//     instead of narrowing first and packing nibbles in 6 operations;
//   - AddSquares is one vpdpbusd on the magnitudes instead of vpmaddubsw,
//     vpmaddwd and an add.
// The bits are those of Avx512Isa (the vector path tests compare both with
// the portable path); the speed is in bench/README.md.
#define LOCO_AVX512_ICL_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vnni,fma")))
#define LOCO_AVX512_ICL_INLINE inline __attribute__((always_inline)) LOCO_AVX512_ICL_TARGET

struct Avx512IclIsa : Avx512Isa {
  static LOCO_AVX512_ICL_INLINE __m256i Narrow(const I* c) {
    const __m512i low_bytes = _mm512_set_epi8(  // byte k: lane k of c[0], then of c[1]
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 124, 120, 116, 112, 108, 104, 100, 96, 92, 88, 84, 80, 76, 72, 68, 64, 60, 56, 52, 48,
        44, 40, 36, 32, 28, 24, 20, 16, 12, 8, 4, 0);
    return _mm512_castsi512_si256(_mm512_permutex2var_epi8(c[0], low_bytes, c[1]));
  }
  template <int kBits>
  static LOCO_AVX512_ICL_INLINE void StorePacked(const I* c, uint8_t* out) {
    if constexpr (kBits == 4) {
      // Byte 0 of 64-bit word j: the low nibble of lane 2j, then that of
      // lane 2j + 1 (bits 32-35 of the word, shifted down to 4-7).
      const __m512i low_nibble = _mm512_set1_epi64(0x0F);
      const __m512i pair0 =
          _mm512_ternarylogic_epi64(low_nibble, c[0], _mm512_srli_epi64(c[0], 28), 0xCA);
      const __m512i pair1 =
          _mm512_ternarylogic_epi64(low_nibble, c[1], _mm512_srli_epi64(c[1], 28), 0xCA);
      const __m512i word_bytes = _mm512_set_epi8(  // byte k: byte 0 of word k of pair0, pair1
          0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
          0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 120, 112, 104, 96, 88, 80, 72, 64,
          56, 48, 40, 32, 24, 16, 8, 0);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                       _mm512_castsi512_si128(_mm512_permutex2var_epi8(pair0, word_bytes, pair1)));
    } else {
      Codes32::StorePacked<kBits>(Narrow(c), out);
    }
  }
  // acc + Σ code² (codes in [-127, 127]: |code| is a valid unsigned and a
  // valid signed byte).
  static LOCO_AVX512_ICL_INLINE __m256i AddSquares(__m256i codes, __m256i acc) {
    const __m256i magnitude = _mm256_abs_epi8(codes);
    return _mm256_dpbusd_epi32(acc, magnitude, magnitude);
  }
};

}  // namespace loco::cpu::detail

#endif  // LOCO_HAVE_AVX512_TARGET

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
};

}  // namespace loco::cpu::detail

#endif  // LOCO_HAVE_AVX512_TARGET

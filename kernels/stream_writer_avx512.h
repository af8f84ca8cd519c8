// Non-temporal stores of a float sequence produced 32 elements at a time,
// at any 4-byte alignment of its destination. Internal to kernels/; include
// after kernels/simd_avx512.h (whose target pragmas it needs).
//
// Why: a kernel whose output is larger than the cache (out of
// DecodeAccumulate over a whole large shard) pays for every ordinary store
// twice, once to read the line it overwrites and once to write it back.
// Non-temporal stores skip the read (glibc's memcpy does the same above a
// size taken from the cache). They need 64-byte aligned addresses, which a
// std::vector<float> does not promise, so the writer shifts the sequence by
// one permutation per vector onto the aligned lines, stores the few
// elements before the first line and after the last one with ordinary
// masked stores, and ends with a store fence.
//
// Contract: Put(i, lo, hi) for i = 0, 32, 64, ... in order (lo holds
// elements [i, i + 16), hi [i + 16, i + 32)), then Finish(end) with end =
// the last i + 32. Every element is written exactly once. Not thread-safe;
// one writer per destination range. The stores are visible to other
// threads after Finish (the fence) and the caller's usual synchronisation.
#pragma once

#include <cstddef>
#include <cstdint>

#if LOCO_HAVE_AVX512_TARGET

namespace loco::cpu::detail {

class StreamWriter {
 public:
  // out must be 4-byte aligned (any float*).
  LOCO_AVX512_INLINE explicit StreamWriter(float* out)
      : out_(out),
        lead_(static_cast<unsigned>((64 - reinterpret_cast<uintptr_t>(out) % 64) % 64 / 4)),
        lead_mask_(static_cast<__mmask16>((1u << lead_) - 1u)),
        shift_(_mm512_add_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
            _mm512_set1_epi32(static_cast<int>(lead_)))),
        carry_(_mm512_setzero_ps()) {}

  LOCO_AVX512_INLINE void Put(size_t i, __m512 lo, __m512 hi) {
    if (i == 0) {
      _mm512_mask_storeu_ps(out_, lead_mask_, lo);  // elements [0, lead)
    } else {
      // Elements [i - 16 + lead, i + lead): the last of the previous
      // vectors, the first of this one.
      _mm512_stream_ps(out_ + i - 16 + lead_, _mm512_permutex2var_ps(carry_, shift_, lo));
    }
    _mm512_stream_ps(out_ + i + lead_, _mm512_permutex2var_ps(lo, shift_, hi));
    carry_ = hi;
  }

  // Elements [end - 16 + lead, end), and the fence.
  LOCO_AVX512_INLINE void Finish(size_t end) {
    if (end != 0)
      _mm512_mask_storeu_ps(out_ + end - 16, static_cast<__mmask16>(~lead_mask_), carry_);
    _mm_sfence();
  }

 private:
  float* out_;
  unsigned lead_;  // elements before the first 64-byte aligned one
  __mmask16 lead_mask_;
  __m512i shift_;  // lane k takes element k + lead of a pair of vectors
  __m512 carry_;   // the previous Put's hi
};

}  // namespace loco::cpu::detail

#endif

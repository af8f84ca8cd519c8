// The AVX-512 4-bit path of DecodeAccumulateRange (contract:
// kernels/decode_accumulate_avx512.h; the arithmetic it must reproduce:
// kernels/decode_accumulate_cpu.cc, AccumulateBlockQuant).
//
// 32 elements at a time: their 16 code bytes are widened to 16 lanes, the
// low nibbles index the table for the even elements and the high nibbles
// (shifted down) for the odd ones, so every payload adds into an even and
// an odd accumulator; the two are interleaved once, when out is stored.
// When the caller asks for streaming, the last group of payloads stores
// out with non-temporal stores (kernels/stream_writer_avx512.h).
#include "kernels/decode_accumulate_avx512.h"

#include <algorithm>

#include "kernels/cpu_features.h"
// Last: its pragmas hold to the end of the file.
#include "kernels/simd_avx512.h"
#include "kernels/stream_writer_avx512.h"

namespace loco::cpu::detail {

#if LOCO_HAVE_AVX512_TARGET

namespace {

// Payloads summed in registers before out is written (as the portable path).
constexpr size_t kGroupPayloads = 8;
constexpr size_t kStep = 32;
// Ordinary stores of out are preceded by write prefetches this many
// elements (4 KiB) ahead. Without them, one thread at 2^24 elements (out
// not in the cache, too small to stream) took 0.63-0.69 ns per element on
// a Xeon; with them 0.43-0.46 (2^20: 0.27 and 0.23), at 512 to 4096
// elements ahead alike, and no slower in cache (2^14: 0.20 and 0.18).
constexpr size_t kOutPrefetchAhead = 1024;

// The value of each 4-bit field u (two's complement: u - 16 for u >= 8)
// times `scale`: (float)code * scale, the contract's one multiply.
LOCO_AVX512_INLINE __m512 DecodeTable(float scale) {
  const __m512 codes = _mm512_cvtepi32_ps(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1));
  return _mm512_mul_ps(codes, _mm512_set1_ps(scale));
}

// One payload's cursor: its block, the elements left in it, and its table.
struct Cursor {
  const uint8_t* data;
  const float* scales;
  size_t block_size;
  size_t block;
  size_t left;
  __m512 table;
};

// Payloads [k0, k0 + count) of `payloads` over the elements; out is read
// (when k0 > 0) and written once, through `stream` when it is not null.
LOCO_AVX512_TARGET void AccumulateGroup(const PayloadView* payloads, size_t n, size_t k0,
                                        size_t group, size_t begin, size_t count, float* out,
                                        StreamWriter* stream) {
  Cursor cursors[kGroupPayloads];
  for (size_t j = 0; j < group; ++j) {
    const PayloadView& p = payloads[k0 + j];
    Cursor& c = cursors[j];
    c.data = p.data;
    c.scales = p.scales;
    c.block_size = static_cast<size_t>(p.block_size);
    c.block = begin / c.block_size;
    c.left = c.block_size - begin % c.block_size;
    c.table = DecodeTable(c.scales[c.block]);
  }
  const bool scale_at_end = k0 + group == n && n > 1;
  const __m512 inv_n = _mm512_set1_ps(static_cast<float>(1.0 / static_cast<double>(n)));
  // Lane l of `even` is element 2l, of `odd` element 2l + 1.
  const __m512i to_even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                            28, 30);
  const __m512i to_odd = _mm512_add_epi32(to_even, _mm512_set1_epi32(1));
  const __m512i low_half = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22,
                                             7, 23);
  const __m512i high_half = _mm512_add_epi32(low_half, _mm512_set1_epi32(8));
  for (size_t i = 0; i < count; i += kStep) {
    __m512 even, odd;
    // The two lines of out kOutPrefetchAhead on, for writing; not past the
    // range (whatever lies there may be another thread's).
    if (stream == nullptr && i + kOutPrefetchAhead < count) {
      __builtin_prefetch(out + i + kOutPrefetchAhead, 1);
      __builtin_prefetch(out + i + kOutPrefetchAhead + 16, 1);
    }
    if (k0 == 0) {
      even = _mm512_setzero_ps();  // replaced by payload 0's values below
      odd = even;
    } else {
      const __m512 a = _mm512_loadu_ps(out + i), b = _mm512_loadu_ps(out + i + 16);
      even = _mm512_permutex2var_ps(a, to_even, b);
      odd = _mm512_permutex2var_ps(a, to_odd, b);
    }
    for (size_t j = 0; j < group; ++j) {
      Cursor& c = cursors[j];
      const __m512i bytes = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(c.data + (begin + i) / 2)));
      const __m512 x_even = _mm512_permutexvar_ps(bytes, c.table);  // low 4 bits index
      const __m512 x_odd = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), c.table);
      if (j == 0 && k0 == 0) {
        even = x_even;
        odd = x_odd;
      } else {
        even = _mm512_add_ps(even, x_even);
        odd = _mm512_add_ps(odd, x_odd);
      }
      c.left -= kStep;
      if (c.left == 0 && i + kStep < count) {
        ++c.block;
        c.left = c.block_size;
        c.table = DecodeTable(c.scales[c.block]);
      }
    }
    if (scale_at_end) {
      even = _mm512_mul_ps(even, inv_n);
      odd = _mm512_mul_ps(odd, inv_n);
    }
    const __m512 lo = _mm512_permutex2var_ps(even, low_half, odd);
    const __m512 hi = _mm512_permutex2var_ps(even, high_half, odd);
    if (stream != nullptr) {
      stream->Put(i, lo, hi);
    } else {
      _mm512_storeu_ps(out + i, lo);
      _mm512_storeu_ps(out + i + 16, hi);
    }
  }
  if (stream != nullptr) stream->Finish(count);
}

// The last group's pass, storing out through a StreamWriter.
LOCO_AVX512_TARGET void AccumulateLastGroupStreaming(const PayloadView* payloads, size_t n,
                                                     size_t k0, size_t begin, size_t count,
                                                     float* out) {
  StreamWriter stream(out);
  AccumulateGroup(payloads, n, k0, n - k0, begin, count, out, &stream);
}

}  // namespace

void AccumulateFourBitAvx512(const PayloadView* payloads, size_t n, size_t begin, size_t count,
                             bool streaming, float* out) {
  for (size_t k0 = 0; k0 < n; k0 += kGroupPayloads) {
    const size_t group = std::min(kGroupPayloads, n - k0);
    if (streaming && k0 + group == n) {
      AccumulateLastGroupStreaming(payloads, n, k0, begin, count, out);
    } else {
      AccumulateGroup(payloads, n, k0, group, begin, count, out, nullptr);
    }
  }
}

#else  // no AVX-512 path on this platform: never called (HaveAvx512() is false)

void AccumulateFourBitAvx512(const PayloadView*, size_t, size_t, size_t, bool, float*) {}

#endif

}  // namespace loco::cpu::detail

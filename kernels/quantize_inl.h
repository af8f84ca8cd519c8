// CPU building blocks of the block quantizer (kernels/quantize.h), shared by
// quantize_cpu.cc, loco_compress_cpu.cc and decode_accumulate_cpu.cc.
// Internal to kernels/: not part of the public interface.
//
// Binding arithmetic (the CUDA kernels mirror it bit for bit through
// kernels/quant_math.h; the library is built with -ffp-contract=off, so every
// line below is one IEEE fp32 op):
//   * absmax of a block ignores non-finite elements (they count as 0).
//   * scale = absmax / qmax (fp32 division). If absmax > 0 and the quotient
//     underflows to 0, scale = std::numeric_limits<float>::denorm_min().
//   * inv = qmax / absmax (fp32 division, once per block); inv := 0 when
//     absmax == 0 or the quotient is not finite (absmax < qmax / FLT_MAX).
//   * code units: y = x * inv (one fp32 multiply), or y = x / scale for a
//     block whose inv is 0. One multiply per element instead of a division;
//     y differs from x / scale by at most three roundings of a value <= qmax.
//   * nearest: code = rne(y) clamped to [-qmax, qmax], where
//     rne(y) = (y + 12582912.0f) - 12582912.0f (1.5 * 2^23). That is round
//     half to even and exact for |y| < 2^22, which always holds because
//     |x| <= absmax gives |y| <= qmax * (1 + 2^-22) (or < qmax / 2 for the
//     denorm_min scale, which only occurs when absmax < qmax * denorm_min / 2).
//   * stochastic: t = y + u (fp32 add), code = floor(t) clamped, with
//     u = StochasticUniform(seed, global index); floor(t) = rne(t) - (rne(t) > t).
//   * a block whose scale is 0 gets all-zero codes (its finite elements are 0).
//   * decode: (float)code * scale, one fp32 multiply.
//
// Two kinds of loops implement it. The runtime-length loops below are written
// to be auto-vectorised by GCC at -O3 (no calls and no branches inside;
// clamps on int32; reductions on integer bit patterns, whose order equals the
// numeric order for non-negative floats). The hot full-block paths use the
// fixed-width vector types F8/I8 (GCC vector extensions): 8 lanes, which the
// AVX2 and x86-64-v4 clones of each LOCO_CPU_CLONES entry point
// (kernels/cpu_clones.h) compile to single ymm instructions and the baseline
// clone to pairs of SSE2 instructions. They perform exactly the same IEEE
// operations lane by lane, so both kinds of loop give the same bits.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu_clones.h"

namespace loco::cpu::detail {

// Largest block (kernels/quantize.h); sizes the per-block stack buffers.
inline constexpr size_t kMaxBlock = 4096;
inline constexpr uint32_t kAbsMask = 0x7FFFFFFFu;
inline constexpr uint32_t kExpMask = 0x7F800000u;
inline constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23

LOCO_CPU_INLINE uint32_t Bits(float x) { return std::bit_cast<uint32_t>(x); }
LOCO_CPU_INLINE float FromBits(uint32_t u) { return std::bit_cast<float>(u); }

// scale = absmax / qmax with the underflow rule. `absmax_bits` is the bit
// pattern of a finite, non-negative absmax.
LOCO_CPU_INLINE float ScaleFromAbsMax(uint32_t absmax_bits, int qmax) {
  const float absmax = FromBits(absmax_bits);
  float s = absmax / static_cast<float>(qmax);
  if (absmax > 0.0f && s == 0.0f) s = std::numeric_limits<float>::denorm_min();
  return s;
}

// inv = qmax / absmax, or 0 when absmax is 0 or the quotient is not finite.
LOCO_CPU_INLINE float InverseFromAbsMax(uint32_t absmax_bits, int qmax) {
  const float absmax = FromBits(absmax_bits);
  if (!(absmax > 0.0f)) return 0.0f;
  const float inv = static_cast<float>(qmax) / absmax;
  return (Bits(inv) & kExpMask) != kExpMask ? inv : 0.0f;
}

// out[i] = x[i] when finite, +0 otherwise. Returns the number of non-finite
// elements; *absmax_bits = bits of max |out[i]|. `out` may equal `x`.
LOCO_CPU_INLINE uint32_t SanitizeAbsMax(const float* x, size_t n, float* out, uint32_t* absmax_bits) {
  int32_t amax = 0;
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = Bits(x[i]);
    const int32_t a = static_cast<int32_t>(u & kAbsMask);
    // All-ones when finite. Signed compare: a <= 0x7FFFFFFF, SSE2 has pcmpgtd.
    const uint32_t keep = a < static_cast<int32_t>(kExpMask) ? ~0u : 0u;
    out[i] = FromBits(u & keep);
    const int32_t ka = a & static_cast<int32_t>(keep);
    amax = ka > amax ? ka : amax;
    bad += keep + 1u;  // 0 when keep is all-ones (wraps), 1 otherwise
  }
  *absmax_bits = static_cast<uint32_t>(amax);
  return bad;
}

// q[i] = clamp(rne(y_i), -qmax, qmax) for finite x, y_i = x[i] * inv, or
// x[i] / scale when inv == 0; all zero when scale == 0.
LOCO_CPU_INLINE void QuantizeNearest(const float* x, size_t n, float scale, float inv, int qmax,
                                     int8_t* q) {
  if (scale == 0.0f) {
    std::memset(q, 0, n);
    return;
  }
  // rne(y) is integral and |y| < 2^22, so the conversion is exact; clamping
  // the integer equals clamping the float.
  if (inv != 0.0f) {
    for (size_t i = 0; i < n; ++i) {
      int32_t c = static_cast<int32_t>((x[i] * inv + kRoundMagic) - kRoundMagic);
      c = c < -qmax ? -qmax : c;
      c = c > qmax ? qmax : c;
      q[i] = static_cast<int8_t>(c);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      int32_t c = static_cast<int32_t>((x[i] / scale + kRoundMagic) - kRoundMagic);
      c = c < -qmax ? -qmax : c;
      c = c > qmax ? qmax : c;
      q[i] = static_cast<int8_t>(c);
    }
  }
}

// splitmix64 (Steele, Lea & Flood; the "+ golden gamma, two xor-shift-
// multiplies, final xor-shift" output function) of seed ^ (index * gamma);
// the top 24 bits times 2^-24, so u is in [0, 1) and exact in fp32.
LOCO_CPU_INLINE float StochasticUniformInline(uint64_t seed, uint64_t index) {
  uint64_t z = seed ^ (index * 0x9E3779B97F4A7C15ull);
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  // z >> 40 < 2^24: the signed conversion is exact and vectorises.
  return static_cast<float>(static_cast<int32_t>(z >> 40)) * (1.0f / 16777216.0f);
}

// q[i] = clamp(floor(y_i + u_i)), y_i as in QuantizeNearest,
// u_i = StochasticUniform(seed, index0 + i). `u` is scratch of n floats.
// All zero when scale == 0.
LOCO_CPU_INLINE void QuantizeStochastic(const float* x, size_t n, float scale, float inv, int qmax,
                                        uint64_t seed, uint64_t index0, float* u, int8_t* q) {
  if (scale == 0.0f) {
    std::memset(q, 0, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) u[i] = StochasticUniformInline(seed, index0 + i);
  // y_i into u: one loop shape for both rules keeps the rounding loop single.
  if (inv != 0.0f) {
    for (size_t i = 0; i < n; ++i) u[i] = x[i] * inv + u[i];
  } else {
    for (size_t i = 0; i < n; ++i) u[i] = x[i] / scale + u[i];
  }
  for (size_t i = 0; i < n; ++i) {
    const float t = u[i];
    const float r = (t + kRoundMagic) - kRoundMagic;
    // floor(t) = rne(t) - (rne(t) > t), done on the integer so the loop stays
    // branch-free (a float select would not be if-converted).
    int32_t c = static_cast<int32_t>(r) - (r > t ? 1 : 0);
    c = c < -qmax ? -qmax : c;
    c = c > qmax ? qmax : c;
    q[i] = static_cast<int8_t>(c);
  }
}

// Packs n codes as `Bits`-bit two's complement, element i at byte (i*Bits)/8,
// bit (i*Bits)%8; writes exactly (n*Bits+7)/8 bytes, unused high bits zero.
template <int kBits>
LOCO_CPU_INLINE void Pack(const int8_t* q, size_t n, uint8_t* out) {
  if constexpr (kBits == 8) {
    std::memcpy(out, q, n);
  } else {
    constexpr size_t kPer = 8 / kBits;
    constexpr uint32_t kMask = (1u << kBits) - 1u;
    const size_t full = n / kPer;
    for (size_t k = 0; k < full; ++k) {
      uint32_t b = 0;
      for (size_t j = 0; j < kPer; ++j) {
        b |= (static_cast<uint32_t>(static_cast<uint8_t>(q[k * kPer + j])) & kMask) << (j * kBits);
      }
      out[k] = static_cast<uint8_t>(b);
    }
    if (const size_t rest = n - full * kPer; rest != 0) {
      uint32_t b = 0;
      for (size_t j = 0; j < rest; ++j) {
        b |= (static_cast<uint32_t>(static_cast<uint8_t>(q[full * kPer + j])) & kMask) << (j * kBits);
      }
      out[full] = static_cast<uint8_t>(b);
    }
  }
}

LOCO_CPU_INLINE void PackCodes(int bits, const int8_t* q, size_t n, uint8_t* out) {
  switch (bits) {
    case 2: Pack<2>(q, n, out); break;
    case 4: Pack<4>(q, n, out); break;
    default: Pack<8>(q, n, out); break;
  }
}

// Inverse of Pack: n sign-extended codes from (n*Bits+7)/8 bytes.
template <int kBits>
LOCO_CPU_INLINE void Unpack(const uint8_t* in, size_t n, int8_t* q) {
  if constexpr (kBits == 8) {
    std::memcpy(q, in, n);
  } else {
    constexpr size_t kPer = 8 / kBits;
    const size_t full = n / kPer;
    for (size_t k = 0; k < full; ++k) {
      const uint8_t b = in[k];
      for (size_t j = 0; j < kPer; ++j) {
        // Move the field to the top of the byte, then arithmetic-shift it down.
        q[k * kPer + j] = static_cast<int8_t>(static_cast<int8_t>(b << (8 - kBits - j * kBits)) >> (8 - kBits));
      }
    }
    for (size_t j = 0; j < n - full * kPer; ++j) {
      const uint8_t b = in[full];
      q[full * kPer + j] = static_cast<int8_t>(static_cast<int8_t>(b << (8 - kBits - j * kBits)) >> (8 - kBits));
    }
  }
}

LOCO_CPU_INLINE void UnpackCodes(int bits, const uint8_t* in, size_t n, int8_t* q) {
  switch (bits) {
    case 2: Unpack<2>(in, n, q); break;
    case 4: Unpack<4>(in, n, q); break;
    default: Unpack<8>(in, n, q); break;
  }
}

// out[i] = (float)q[i] * scale.
LOCO_CPU_INLINE void DecodeAssign(const int8_t* q, size_t n, float scale, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale;
}
// out[i] += (float)q[i] * scale.
LOCO_CPU_INLINE void DecodeAdd(const int8_t* q, size_t n, float scale, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] += static_cast<float>(q[i]) * scale;
}

// Σ q[i]^2, exact (n <= kMaxBlock keeps it far below 2^31).
LOCO_CPU_INLINE int32_t SumSquares(const int8_t* q, size_t n) {
  int32_t s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<int32_t>(q[i]) * static_cast<int32_t>(q[i]);
  return s;
}

// ---- fixed-width vectors for the full-block paths -------------------------
// Blocks are multiples of 32 elements, so a full block is a whole number of
// 8-lane vectors and of 32-code packing groups; no loop below has a tail.

// GCC notes that passing a 32-byte vector by value has a different ABI with
// and without AVX. These helpers are always inlined into one clone and never
// cross a call boundary, so there is no ABI to disagree about.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

inline constexpr size_t kLanes = 8;
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
typedef uint32_t U8 __attribute__((vector_size(32)));
typedef int8_t C32 __attribute__((vector_size(32)));
typedef int64_t L4 __attribute__((vector_size(32)));
typedef uint16_t W16 __attribute__((vector_size(32)));
typedef uint8_t B16 __attribute__((vector_size(16)));
typedef uint8_t B8 __attribute__((vector_size(8)));

LOCO_CPU_INLINE F8 LoadF8(const float* p) {
  F8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
LOCO_CPU_INLINE void StoreF8(float* p, F8 v) { std::memcpy(p, &v, sizeof(v)); }
LOCO_CPU_INLINE F8 SplatF8(float x) { return F8{} + x; }
LOCO_CPU_INLINE I8 SplatI8(int32_t x) { return I8{} + x; }
// Bit reinterpretation (a vector cast between same-size vectors keeps the bits).
LOCO_CPU_INLINE I8 BitsI8(F8 v) { return (I8)v; }
LOCO_CPU_INLINE F8 BitsF8(I8 v) { return (F8)v; }
LOCO_CPU_INLINE I8 MaxI8(I8 a, I8 b) { return a > b ? a : b; }
// Max over the lanes.
LOCO_CPU_INLINE int32_t LaneMax(I8 v) {
  int32_t m = v[0];
  for (size_t j = 1; j < kLanes; ++j) m = v[j] > m ? v[j] : m;
  return m;
}
LOCO_CPU_INLINE int32_t LaneSum(I8 v) {
  int32_t m = 0;
  for (size_t j = 0; j < kLanes; ++j) m += v[j];
  return m;
}

// GCC's __builtin_shuffle of 32 bytes (GCC's code is unchanged). Clang (the
// fuzzing build) has no shuffle by a vector of indices, so there the bytes
// move one by one.
#if defined(__clang__)
LOCO_CPU_INLINE C32 ShuffleBytesByLane(C32 v, C32 idx) {
  C32 r{};
  for (int j = 0; j < 32; ++j) r[j] = v[idx[j] & 31];
  return r;
}
#define LOCO_SHUFFLE_BYTES(v, ...) ShuffleBytesByLane(v, __VA_ARGS__)
#else
#define LOCO_SHUFFLE_BYTES(v, ...) __builtin_shuffle(v, __VA_ARGS__)
#endif

// 8 int8 codes, sign-extended to int32. (GCC turns a __builtin_convertvector
// between int8 and int32 vectors into scalar code; a broadcast, a byte
// shuffle that puts byte j at the top of lane j, and an arithmetic shift are
// three instructions on AVX2.)
LOCO_CPU_INLINE I8 LoadCodes8(const int8_t* p) {
  int64_t w;
  std::memcpy(&w, p, sizeof(w));
  const C32 b = (C32)(L4{} + w);  // the 8 bytes in both 128-bit halves
  const C32 top = LOCO_SHUFFLE_BYTES(b, C32{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                           20, 20, 20, 20, 21, 21, 21, 21, 22, 22, 22, 22, 23, 23, 23, 23});
  return ((I8)top) >> 24;
}
// The low bytes of 8 int32 codes in [-128, 127], stored as 8 int8.
LOCO_CPU_INLINE void StoreCodes8(int8_t* p, I8 c) {
  const C32 low = LOCO_SHUFFLE_BYTES((C32)c, C32{0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28,
                                                0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28});
  std::memcpy(p, &low, 8);
}
// (float)code, exact for |code| < 2^24.
LOCO_CPU_INLINE F8 CodesToF8(I8 c) { return __builtin_convertvector(c, F8); }

// clamp(rne(y), -qmax, qmax) for |y| < 2^22 (QuantizeNearest, 8 lanes).
LOCO_CPU_INLINE I8 NearestCodes8(F8 y, I8 qmax) {
  const F8 r = (y + kRoundMagic) - kRoundMagic;
  I8 c = __builtin_convertvector(r, I8);  // exact: r is integral
  const I8 lo = -qmax;
  c = c < lo ? lo : c;
  return c > qmax ? qmax : c;
}

// Packs `len` codes, a multiple of 32, exactly like PackCodes.
LOCO_CPU_INLINE void PackFullBlock(int bits, const int8_t* q, size_t len, uint8_t* out) {
  if (bits == 4) {
    for (size_t k = 0; k < len; k += 32) {
      W16 w;  // lane j: code 2j in the low byte, code 2j+1 in the high byte
      std::memcpy(&w, q + k, sizeof(w));
      const W16 t = (w & 0x000F) | ((w >> 4) & 0x00F0);
      const B16 b = __builtin_convertvector(t, B16);
      std::memcpy(out + k / 2, &b, sizeof(b));
    }
  } else if (bits == 2) {
    for (size_t k = 0; k < len; k += 32) {
      U8 w;  // lane j: codes 4j..4j+3, one per byte
      std::memcpy(&w, q + k, sizeof(w));
      const U8 t = (w & 0x3u) | ((w >> 6) & 0xCu) | ((w >> 12) & 0x30u) | ((w >> 18) & 0xC0u);
      const B8 b = __builtin_convertvector(t, B8);
      std::memcpy(out + k / 4, &b, sizeof(b));
    }
  } else {
    std::memcpy(out, q, len);
  }
}

// The 8 sign-extended codes packed in the 8 * kBits / 8 bytes at p (element
// j at bit j * kBits, as Pack lays them out): each lane shifts its field to
// the top of a 32-bit word, then an arithmetic shift brings it back down.
template <int kBits>
LOCO_CPU_INLINE I8 UnpackCodes8(const uint8_t* p) {
  if constexpr (kBits == 8) {
    return LoadCodes8(reinterpret_cast<const int8_t*>(p));
  } else {
    uint32_t w = 0;
    std::memcpy(&w, p, kBits);  // 8 fields of kBits bits: kBits bytes
    constexpr int kTop = 32 - kBits;
    const U8 shifted = (U8{} + w) << U8{kTop, kTop - kBits, kTop - 2 * kBits, kTop - 3 * kBits,
                                        kTop - 4 * kBits, kTop - 5 * kBits, kTop - 6 * kBits,
                                        kTop - 7 * kBits};
    return ((I8)shifted) >> kTop;
  }
}

#pragma GCC diagnostic pop

}  // namespace loco::cpu::detail

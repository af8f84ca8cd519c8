// CPU building blocks of the block quantizer (kernels/quantize.h), shared by
// quantize_cpu.cc, loco_compress_cpu.cc and decode_accumulate_cpu.cc.
// Internal to kernels/: not part of the public interface.
//
// Binding arithmetic (the CUDA kernels mirror it bit for bit; the library is
// built with -ffp-contract=off, so every line below is one IEEE fp32 op):
//   * absmax of a block ignores non-finite elements (they count as 0).
//   * scale = absmax / qmax (fp32 division). If absmax > 0 and the quotient
//     underflows to 0, scale = std::numeric_limits<float>::denorm_min().
//   * nearest: y = x / scale; code = rne(y) clamped to [-qmax, qmax], where
//     rne(y) = (y + 12582912.0f) - 12582912.0f (1.5 * 2^23). That is round
//     half to even and exact for |y| < 2^22, which always holds because
//     |x| <= absmax gives |y| <= qmax * (1 + 2^-23) (or < qmax / 2 for the
//     denorm_min scale, which only occurs when absmax < qmax * denorm_min / 2).
//   * stochastic: t = y + u (fp32 add), code = floor(t) clamped, with
//     u = StochasticUniform(seed, global index); floor(t) = rne(t) - (rne(t) > t).
//   * a block whose scale is 0 gets all-zero codes (its finite elements are 0).
//   * decode: (float)code * scale, one fp32 multiply.
//
// The loops are written to be auto-vectorised by GCC at -O3, for baseline
// SSE2 and for the AVX2 clone of each LOCO_CPU_CLONES entry point
// (kernels/cpu_clones.h): no calls and no branches inside (selects only;
// clamps and the stochastic floor are done on int32), and reductions done on
// integer bit patterns (a float max reduction would not vectorise without
// -ffast-math; for non-negative floats the bit-pattern order is the numeric
// order, so the integer max is exact).
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

// q[i] = clamp(rne(x[i] / scale), -qmax, qmax) for finite x; all zero when scale == 0.
LOCO_CPU_INLINE void QuantizeNearest(const float* x, size_t n, float scale, int qmax, int8_t* q) {
  if (scale == 0.0f) {
    std::memset(q, 0, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const float y = x[i] / scale;
    // rne(y) is integral and |y| < 2^22, so the conversion is exact; clamping
    // the integer equals clamping the float.
    int32_t c = static_cast<int32_t>((y + kRoundMagic) - kRoundMagic);
    c = c < -qmax ? -qmax : c;
    c = c > qmax ? qmax : c;
    q[i] = static_cast<int8_t>(c);
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

// q[i] = clamp(floor(x[i] / scale + u_i)), u_i = StochasticUniform(seed, index0 + i).
// `u` is scratch of n floats. All zero when scale == 0.
LOCO_CPU_INLINE void QuantizeStochastic(const float* x, size_t n, float scale, int qmax, uint64_t seed,
                               uint64_t index0, float* u, int8_t* q) {
  if (scale == 0.0f) {
    std::memset(q, 0, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) u[i] = StochasticUniformInline(seed, index0 + i);
  for (size_t i = 0; i < n; ++i) {
    const float t = x[i] / scale + u[i];
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

}  // namespace loco::cpu::detail

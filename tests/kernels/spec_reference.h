// Scalar, obviously-correct renderings of the kernel contracts, written from
// the text of kernels/quantize.h and kernels/loco_compress.h without sharing
// code with the kernels: std::isfinite/std::fabs/std::nearbyint/std::floor
// instead of bit tricks, a bit-by-bit packer instead of byte formulas. The
// tests compare the vectorised kernels against these bit for bit, and check
// the references themselves against closed-form bounds.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/loco_compress.h"
#include "kernels/quantize.h"

namespace loco::testing_ref {

// Writes code i's `bits` low bits, one bit at a time, at stream bit i*bits.
inline std::vector<uint8_t> PackRef(const std::vector<int>& codes, int bits) {
  std::vector<uint8_t> out((codes.size() * bits + 7) / 8, 0);
  for (size_t i = 0; i < codes.size(); ++i) {
    const uint32_t field = static_cast<uint32_t>(codes[i]) & ((1u << bits) - 1u);
    for (int j = 0; j < bits; ++j) {
      const size_t bit = i * static_cast<size_t>(bits) + static_cast<size_t>(j);
      if ((field >> j) & 1u) out[bit / 8] = static_cast<uint8_t>(out[bit / 8] | (1u << (bit % 8)));
    }
  }
  return out;
}

// Reads n codes of `bits` bits one bit at a time and sign-extends them.
inline std::vector<int> UnpackRef(const uint8_t* data, size_t n, int bits) {
  std::vector<int> codes(n);
  for (size_t i = 0; i < n; ++i) {
    int v = 0;
    for (int j = 0; j < bits; ++j) {
      const size_t bit = i * static_cast<size_t>(bits) + static_cast<size_t>(j);
      v |= ((data[bit / 8] >> (bit % 8)) & 1) << j;
    }
    if (v >= (1 << (bits - 1))) v -= (1 << bits);
    codes[i] = v;
  }
  return codes;
}

// splitmix64 as published (Vigna): z = x + golden gamma, then two
// xor-shift-multiply rounds and a final xor-shift.
inline uint64_t SplitMix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline float UniformRef(uint64_t seed, uint64_t index) {
  const uint64_t top24 = SplitMix64(seed ^ (index * 0x9E3779B97F4A7C15ull)) >> 40;
  return static_cast<float>(std::ldexp(static_cast<double>(top24), -24));
}

inline float AbsMaxRef(const float* x, size_t n) {
  float absmax = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if (std::isfinite(x[i])) absmax = std::max(absmax, std::fabs(x[i]));
  }
  return absmax;
}

inline float ScaleRef(const float* x, size_t n, int qmax) {
  const float absmax = AbsMaxRef(x, n);
  float s = absmax / static_cast<float>(qmax);
  if (absmax > 0.0f && s == 0.0f) s = std::numeric_limits<float>::denorm_min();
  return s;
}

// A block's scale and the reciprocal its codes are computed with: qmax/absmax,
// or 0 ("divide by the scale") when absmax is 0 or qmax/absmax is not finite.
struct BlockRef {
  float scale = 0.0f;
  float inv = 0.0f;
};

inline BlockRef BlockOf(const float* x, size_t n, int qmax) {
  const float absmax = AbsMaxRef(x, n);
  BlockRef b;
  b.scale = ScaleRef(x, n, qmax);
  if (absmax > 0.0f) {
    const float inv = static_cast<float>(qmax) / absmax;
    b.inv = std::isfinite(inv) ? inv : 0.0f;
  }
  return b;
}

// x in code units under the block's rule.
inline float CodeUnitsRef(float x, const BlockRef& b) { return b.inv != 0.0f ? x * b.inv : x / b.scale; }

inline int NearestCodeRef(float x, const BlockRef& b, int qmax) {
  if (b.scale == 0.0f) return 0;
  const float y = CodeUnitsRef(x, b);
  const float c = std::nearbyint(y);  // default rounding mode: nearest, ties to even
  return static_cast<int>(std::clamp(c, -static_cast<float>(qmax), static_cast<float>(qmax)));
}

inline int StochasticCodeRef(float x, const BlockRef& b, int qmax, float u) {
  if (b.scale == 0.0f) return 0;
  const float t = CodeUnitsRef(x, b) + u;
  const float c = std::floor(t);
  return static_cast<int>(std::clamp(c, -static_cast<float>(qmax), static_cast<float>(qmax)));
}

struct Quantized {
  std::vector<int> codes;
  std::vector<float> scales;
  uint64_t nonfinite = 0;
};

inline Quantized QuantizeRef(const float* x, size_t n, const QuantizeParams& p) {
  Quantized r;
  r.codes.resize(n);
  const int qmax = (1 << (p.bits - 1)) - 1;
  const size_t b = static_cast<size_t>(p.block_size);
  for (size_t b0 = 0; b0 < n; b0 += b) {
    const size_t len = std::min(b, n - b0);
    const BlockRef s = BlockOf(x + b0, len, qmax);
    r.scales.push_back(s.scale);
    for (size_t i = b0; i < b0 + len; ++i) {
      const float v = std::isfinite(x[i]) ? x[i] : 0.0f;
      if (!std::isfinite(x[i])) ++r.nonfinite;
      r.codes[i] = p.rounding == Rounding::kNearest
                       ? NearestCodeRef(v, s, qmax)
                       : StochasticCodeRef(v, s, qmax, UniformRef(p.seed, p.index_offset + i));
    }
  }
  return r;
}

// The error state as the reference keeps it (same layout as ErrorState).
struct ErrorRef {
  std::vector<int> codes;     // error_bits 8
  std::vector<float> scales;  // error_bits 8
  std::vector<float> values;  // error_bits 32
};

inline ErrorRef MakeErrorRef(size_t n, int block, int error_bits) {
  ErrorRef e;
  if (error_bits == 32) {
    e.values.assign(n, 0.0f);
  } else {
    e.codes.assign(n, 0);
    e.scales.assign(NumBlocks(n, block), 0.0f);
  }
  return e;
}

struct LocoOut {
  Quantized payload;
  double error_sq_norm = 0;
};

// One LoCo step, element by element, exactly as kernels/loco_compress.h and
// the binding notes in kernels/loco_compress_cpu.cc state it.
inline LocoOut LocoStepRef(const std::vector<float>& g, int64_t step, const LocoParams& p,
                           ErrorRef& st) {
  const size_t n = g.size();
  const size_t b = static_cast<size_t>(p.block_size);
  const int qmax = (1 << (p.bits - 1)) - 1;
  const bool naive = p.mode == CompensationMode::kNaive;
  const bool reset = p.mode == CompensationMode::kLoco && p.reset_period > 0 &&
                     (step + 1) % p.reset_period == 0;
  LocoOut out;
  out.payload.codes.assign(n, 0);
  for (size_t b0 = 0, blk = 0; b0 < n; b0 += b, ++blk) {
    const size_t len = std::min(b, n - b0);
    std::vector<float> ehat(len, 0.0f), h(len), e(len);
    std::vector<bool> bad(len);
    for (size_t i = 0; i < len; ++i) {
      if (!naive) {
        ehat[i] = p.error_bits == 8 ? static_cast<float>(st.codes[b0 + i]) * st.scales[blk]
                                    : st.values[b0 + i];
      }
      const float hv = naive ? g[b0 + i] : g[b0 + i] + ehat[i];
      bad[i] = !std::isfinite(hv);
      if (bad[i]) ++out.payload.nonfinite;
      h[i] = bad[i] ? 0.0f : hv;
    }
    const BlockRef blk_q = BlockOf(h.data(), len, qmax);
    const float s = blk_q.scale;
    out.payload.scales.push_back(s);
    for (size_t i = 0; i < len; ++i) {
      out.payload.codes[b0 + i] =
          p.rounding == Rounding::kNearest
              ? NearestCodeRef(h[i], blk_q, qmax)
              : StochasticCodeRef(h[i], blk_q, qmax, UniformRef(p.seed, p.index_offset + b0 + i));
    }
    if (naive) continue;
    for (size_t i = 0; i < len; ++i) {
      const float hhat = static_cast<float>(out.payload.codes[b0 + i]) * s;
      const float r = h[i] - hhat;
      float ev = r;
      if (p.mode == CompensationMode::kLoco) {
        const float a = p.beta * ehat[i];
        const float c = (1.0f - p.beta) * r;
        ev = a + c;
      }
      e[i] = (bad[i] || !std::isfinite(ev)) ? 0.0f : ev;
    }
    if (p.error_bits == 8) {
      const BlockRef blk_e = reset ? BlockRef{} : BlockOf(e.data(), len, 127);
      const float s8 = blk_e.scale;
      st.scales[blk] = s8;
      for (size_t i = 0; i < len; ++i) {
        st.codes[b0 + i] = reset ? 0 : NearestCodeRef(e[i], blk_e, 127);
        const double d = static_cast<double>(st.codes[b0 + i]) * static_cast<double>(s8);
        out.error_sq_norm += d * d;
      }
    } else {
      for (size_t i = 0; i < len; ++i) {
        st.values[b0 + i] = reset ? 0.0f : e[i];
        out.error_sq_norm += static_cast<double>(st.values[b0 + i]) * st.values[b0 + i];
      }
    }
  }
  return out;
}

// Normal values whose magnitude varies by block (so scales differ).
inline std::vector<float> RandomVector(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> mag(0.1f, 10.0f);
  std::vector<float> x(n);
  float m = mag(rng);
  for (size_t i = 0; i < n; ++i) {
    if (i % 32 == 0) m = mag(rng);
    x[i] = sigma * m * nd(rng);
  }
  return x;
}

}  // namespace loco::testing_ref

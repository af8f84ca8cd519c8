// Element-level arithmetic of the block quantizer, LoCo and the bf16 cast,
// written once for both the host and the device.
//
// Every floating-point step is one explicitly rounded IEEE fp32 operation
// (the __f*_rn intrinsics on the device, plain operators on the host, where
// the kernels are built with -ffp-contract=off), so a CUDA kernel built from
// these functions produces the same bits as the same sequence on the CPU.
// The CUDA kernels use them; the CUDA parity test also runs them on the host
// against the cpu:: reference, which catches a drift without a GPU.
//
// Header-only and dependency-free so it compiles as C++ and as CUDA.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define LOCO_HD __host__ __device__ __forceinline__
#else
#define LOCO_HD inline
#endif

namespace loco::qmath {

LOCO_HD float Add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
LOCO_HD float Sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
LOCO_HD float Mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
LOCO_HD float Div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

LOCO_HD uint32_t FloatBits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}
LOCO_HD float BitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}

// Finite test on the bit pattern: independent of compiler math flags.
LOCO_HD bool IsFinite(float x) { return (FloatBits(x) & 0x7F800000u) != 0x7F800000u; }
LOCO_HD float AbsF(float x) { return BitsToFloat(FloatBits(x) & 0x7FFFFFFFu); }
// |x| for finite x, 0 otherwise: the contribution of x to a block's absmax.
LOCO_HD float AbsOrZero(float x) { return IsFinite(x) ? AbsF(x) : 0.0f; }
LOCO_HD float MaxF(float a, float b) { return a > b ? a : b; }

// Smallest positive denormal (2^-149), the scale of a block whose absmax/qmax underflows.
LOCO_HD float MinDenormal() { return BitsToFloat(1u); }

// scale = absmax / qmax; 0 for a zero block; never 0 for a non-zero block.
LOCO_HD float BlockScale(float absmax, int qmax) {
  if (!(absmax > 0.0f)) return 0.0f;
  float s = Div(absmax, static_cast<float>(qmax));
  return s > 0.0f ? s : MinDenormal();
}

// The per-block reciprocal that replaces a per-element division:
// inv = qmax / absmax (one fp32 division per block). It is 0, meaning "divide
// by the scale instead", when absmax is 0 (the block's codes are all 0) or
// when qmax / absmax overflows, i.e. absmax < qmax / FLT_MAX (about 2e-38 for
// qmax 7): every element of such a block is within a few ulp of the denormal
// range, and x / scale keeps the old exact rule for it.
LOCO_HD float BlockInverse(float absmax, int qmax) {
  if (!(absmax > 0.0f)) return 0.0f;
  const float inv = Div(static_cast<float>(qmax), absmax);
  return IsFinite(inv) ? inv : 0.0f;
}

// x in code units: x * inv, or x / scale where inv is 0 (BlockInverse). For
// |x| <= absmax the product is at most qmax * (1 + 2^-23) in magnitude, and it
// differs from x / scale by at most three fp32 roundings of a value <= qmax.
LOCO_HD float CodeUnits(float x, float scale, float inv) {
  return inv != 0.0f ? Mul(x, inv) : Div(x, scale);
}

// Round half to even for |y| < 2^22: adding and subtracting 1.5 * 2^23 leaves
// the integer nearest to y under the current (nearest-even) rounding mode.
LOCO_HD float RoundHalfEven(float y) { return Sub(Add(y, 12582912.0f), 12582912.0f); }

LOCO_HD int ClampCode(float c, int qmax) {
  if (c > static_cast<float>(qmax)) return qmax;
  if (c < -static_cast<float>(qmax)) return -qmax;
  return static_cast<int>(c);
}

// Nearest-rounded code of a finite x under `scale` and its BlockInverse `inv`
// (scale 0 -> code 0).
LOCO_HD int NearestCode(float x, float scale, float inv, int qmax) {
  if (scale == 0.0f) return 0;
  return ClampCode(RoundHalfEven(CodeUnits(x, scale, inv)), qmax);
}

// splitmix64's output function applied to seed ^ (index * golden), top 24 bits * 2^-24.
LOCO_HD float StochasticUniform(uint64_t seed, uint64_t index) {
  uint64_t z = seed ^ (index * 0x9E3779B97F4A7C15ull);
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

// Stochastically rounded code: floor(CodeUnits(x) + u), clamped (scale 0 -> code 0).
LOCO_HD int StochasticCode(float x, float scale, float inv, int qmax, float u) {
  if (scale == 0.0f) return 0;
  float y = Add(CodeUnits(x, scale, inv), u);
#if defined(__CUDA_ARCH__)
  float f = floorf(y);
#else
  float f = __builtin_floorf(y);
#endif
  return ClampCode(f, qmax);
}

LOCO_HD float Decode(int code, float scale) { return Mul(static_cast<float>(code), scale); }

// `bits`-bit two's complement field of a code, and back.
LOCO_HD uint32_t CodeField(int code, int bits) {
  return static_cast<uint32_t>(code) & ((1u << bits) - 1u);
}
LOCO_HD int FieldCode(uint32_t field, int bits) {
  uint32_t sign = 1u << (bits - 1);
  return static_cast<int>(field ^ sign) - static_cast<int>(sign);
}

// fp32 -> bf16, round to nearest even; NaN -> quiet NaN with the sign kept.
LOCO_HD uint16_t Fp32ToBf16(float x) {
  uint32_t u = FloatBits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7FC0u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
LOCO_HD float Bf16ToFp32(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

}  // namespace loco::qmath

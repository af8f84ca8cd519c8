// Block quantizer: symmetric per-block absmax quantization to b-bit codes.
//
// Layout (shared by CPU, CUDA and the wire format):
//   * Elements are cut into blocks of `block_size` (multiple of 32, 32..4096);
//     the last block may be shorter. One fp32 scale per block:
//     scale = max|x_block| / qmax, qmax = 2^(bits-1) - 1. A block of zeros has
//     scale 0 and decodes to zeros. When max|x| > 0 but max|x|/qmax underflows
//     to 0, the scale is the smallest positive denormal instead.
//   * Codes are signed integers in [-qmax, qmax], stored in two's complement
//     in `bits` bits and packed little-endian within each byte: element i goes
//     to byte (i*bits)/8 at bit offset (i*bits)%8. So 8-bit codes are int8,
//     4-bit codes put element 2k in the low nibble, 2k+1 in the high nibble,
//     2-bit codes put four per byte from the lowest bits up. Unused high bits
//     of the last byte are zero.
//   * Code units: y = x * inv with inv = qmax / max|x_block| (one IEEE
//     division per block, one multiply per element); for a block where that
//     quotient is not finite (max|x| < qmax / FLT_MAX) y = x / scale instead.
//     y is within three fp32 roundings of x / scale, so nearest rounding
//     keeps |x - D(Q(x))| <= scale/2 up to qmax * 2^-22 * scale.
//   * Nearest rounding: code = rint(y) (round half to even), clamped.
//     Stochastic rounding: code = floor(y + u) with
//     u = StochasticUniform(seed, element_index) in [0, 1), clamped.
//   * Decode: x' = code * scale (one IEEE multiply).
// CPU and CUDA produce bit-identical codes and scales for the same input.
//
// Non-finite inputs: they are not quantized; each one is counted in
// QuantizeStats::nonfinite and treated as 0 (so a payload never carries
// NaN/Inf). Callers decide what to do with a non-zero count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace loco {

enum class Rounding { kNearest, kStochastic };

struct QuantizeParams {
  int bits = 4;             // 2, 4 or 8
  int block_size = 128;     // multiple of 32 in [32, 4096]
  Rounding rounding = Rounding::kNearest;
  uint64_t seed = 0;        // stochastic rounding only
  // Global index of element 0 of this call, so that stochastic rounding of a
  // shard slice matches rounding the whole vector. Must be a multiple of
  // block_size.
  uint64_t index_offset = 0;
};

struct QuantizeStats {
  uint64_t nonfinite = 0;
};

// Largest code magnitude for `bits`: 2^(bits-1) - 1.
inline int QMax(int bits) { return (1 << (bits - 1)) - 1; }
inline size_t NumBlocks(size_t n, int block_size) {
  return (n + static_cast<size_t>(block_size) - 1) / static_cast<size_t>(block_size);
}
inline size_t PackedBytes(size_t n, int bits) { return (n * static_cast<size_t>(bits) + 7) / 8; }

// Checks bits in {2,4,8} and block_size a multiple of 32 in [32, 4096].
Status ValidateQuantizeParams(int bits, int block_size);

// Deterministic uniform in [0, 1) for stochastic rounding: the top 24 bits of
// splitmix64(seed ^ (index * 0x9E3779B97F4A7C15)) times 2^-24. Same on CPU and GPU.
float StochasticUniform(uint64_t seed, uint64_t index);

namespace cpu {

// x[n] -> codes[PackedBytes(n,bits)], scales[NumBlocks(n,block)].
Status Quantize(const float* x, size_t n, const QuantizeParams& p, uint8_t* codes, float* scales,
                QuantizeStats* stats);
// codes, scales -> out[n].
Status Dequantize(const uint8_t* codes, const float* scales, size_t n, int bits, int block_size,
                  float* out);
// out[i] += the decoded value of element i: bit for bit Dequantize into a
// buffer, then out[i] += buffer[i] (the decoded value is rounded to fp32
// before the add; no fused multiply-add).
Status DequantizeAdd(const uint8_t* codes, const float* scales, size_t n, int bits, int block_size,
                     float* out);
// The encoder of a delta against a replica that follows it (the server's
// return path): codes and scales of d = target - replica with nearest
// rounding, and replica += their decoded values. Bit for bit Quantize of d
// (kNearest) into codes and scales, then DequantizeAdd of them into
// replica, in one pass per block. d's
// non-finite elements are counted in stats->nonfinite and quantized as 0;
// replica has moved all the same, and the caller decides. CPU only: a
// device holds no replica. Thread-safe for disjoint ranges of whole blocks.
Status QuantizeDeltaAdd(const float* target, float* replica, size_t n, int bits, int block_size,
                        uint8_t* codes, float* scales, QuantizeStats* stats);

}  // namespace cpu

namespace cuda {

// Same contracts as cpu::, on device pointers, enqueued on `stream` (a
// cudaStream_t, nullptr = default stream). stats may be a host pointer; the
// call synchronises the stream when stats != nullptr. Returns Unimplemented
// when the build has no CUDA, Unavailable when no device is present.
Status Quantize(const float* x, size_t n, const QuantizeParams& p, uint8_t* codes, float* scales,
                QuantizeStats* stats, void* stream);
Status Dequantize(const uint8_t* codes, const float* scales, size_t n, int bits, int block_size,
                  float* out, void* stream);
Status DequantizeAdd(const uint8_t* codes, const float* scales, size_t n, int bits,
                     int block_size, float* out, void* stream);

}  // namespace cuda
}  // namespace loco

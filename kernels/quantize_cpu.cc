// CPU reference of the block quantizer (contract and layout: kernels/quantize.h;
// binding arithmetic: kernels/quantize_inl.h). Single-threaded; callers split
// large ranges at block boundaries (index_offset keeps stochastic rounding
// identical to a whole-vector call).
#include <algorithm>
#include <string>

#include "kernels/avx2_clones.h"
#include "kernels/call_checks.h"
#include "kernels/quantize.h"
#include "kernels/quantize_inl.h"

namespace loco {

float StochasticUniform(uint64_t seed, uint64_t index) {
  return cpu::detail::StochasticUniformInline(seed, index);
}

namespace cpu {
namespace {

using detail::kMaxBlock;


// The block loop. Per block: sanitize + absmax into a stack buffer (x is read
// from memory once), scale, codes, pack straight into the output.
LOCO_CPU_CLONES uint64_t QuantizeBlocks(const float* x, size_t n, const QuantizeParams& p, uint8_t* codes,
                        float* scales) {
  alignas(64) float h[kMaxBlock];
  alignas(64) float u[kMaxBlock];
  alignas(64) int8_t q[kMaxBlock];
  const size_t block = static_cast<size_t>(p.block_size);
  const int qmax = QMax(p.bits);
  uint64_t nonfinite = 0;
  size_t blk = 0;
  for (size_t b0 = 0; b0 < n; b0 += block, ++blk) {
    const size_t len = std::min(block, n - b0);
    uint32_t amax = 0;
    nonfinite += detail::SanitizeAbsMax(x + b0, len, h, &amax);
    const float s = detail::ScaleFromAbsMax(amax, qmax);
    const float inv = detail::InverseFromAbsMax(amax, qmax);
    if (p.rounding == Rounding::kNearest) {
      detail::QuantizeNearest(h, len, s, inv, qmax, q);
    } else {
      detail::QuantizeStochastic(h, len, s, inv, qmax, p.seed, p.index_offset + b0, u, q);
    }
    // block is a multiple of 32, so every block starts on a byte boundary.
    uint8_t* out = codes + b0 * static_cast<size_t>(p.bits) / 8;
    if (len % 32 == 0) {
      detail::PackFullBlock(p.bits, q, len, out);
    } else {
      detail::PackCodes(p.bits, q, len, out);
    }
    scales[blk] = s;
  }
  return nonfinite;
}

// add: out += the decoded values; otherwise out = them.
LOCO_CPU_CLONES void DequantizeBlocks(const uint8_t* codes, const float* scales, size_t n, int bits,
                                      int block_size, bool add, float* out) {
  alignas(64) int8_t q[kMaxBlock];
  const size_t block = static_cast<size_t>(block_size);
  size_t blk = 0;
  for (size_t b0 = 0; b0 < n; b0 += block, ++blk) {
    const size_t len = std::min(block, n - b0);
    detail::UnpackCodes(bits, codes + b0 * static_cast<size_t>(bits) / 8, len, q);
    if (add) {
      detail::DecodeAdd(q, len, scales[blk], out + b0);
    } else {
      detail::DecodeAssign(q, len, scales[blk], out + b0);
    }
  }
}

// cpu::QuantizeDeltaAdd: per block, d = target - replica into a stack
// buffer, then the steps of QuantizeBlocks (nearest rounding) and of
// DequantizeBlocks (add) on it, with the codes still unpacked. One pass
// over the block in the L1 cache instead of three calls that each read and
// wrote the whole range (2.9x faster on a 64K-element piece in cache).
//
// Both inputs are prefetched kDeltaPrefetchAhead elements ahead: from
// memory the hardware prefetcher alone left the loop waiting (one thread,
// 2^26 elements on a Xeon: 0.88 ns per element, 0.60-0.64 with the
// prefetches; 512 elements ahead was faster than 256, 1024, 2048 or 4096).
// Read prefetches for the replica too: a write prefetch made the loop 45 %
// slower in cache (2^14 elements), where these cost nothing measurable. A
// prefetch past the end of the data is harmless.
constexpr size_t kFloatsPerLine = 16;
constexpr size_t kDeltaPrefetchAhead = 512;

LOCO_CPU_INLINE uint64_t QuantizeDeltaBody(const float* target, float* replica, size_t n, int bits,
                                           int block_size, uint8_t* codes, float* scales) {
  alignas(64) float d[kMaxBlock];
  alignas(64) int8_t q[kMaxBlock];
  const size_t block = static_cast<size_t>(block_size);
  const int qmax = QMax(bits);
  uint64_t nonfinite = 0;
  size_t blk = 0;
  for (size_t b0 = 0; b0 < n; b0 += block, ++blk) {
    const size_t len = std::min(block, n - b0);
    for (size_t i = 0; i < len; i += kFloatsPerLine) {
      __builtin_prefetch(target + b0 + i + kDeltaPrefetchAhead);
      __builtin_prefetch(replica + b0 + i + kDeltaPrefetchAhead);
    }
    for (size_t i = 0; i < len; ++i) d[i] = target[b0 + i] - replica[b0 + i];
    uint32_t amax = 0;
    nonfinite += detail::SanitizeAbsMax(d, len, d, &amax);
    const float s = detail::ScaleFromAbsMax(amax, qmax);
    const float inv = detail::InverseFromAbsMax(amax, qmax);
    detail::QuantizeNearest(d, len, s, inv, qmax, q);
    uint8_t* out = codes + b0 * static_cast<size_t>(bits) / 8;
    if (len % 32 == 0) {
      detail::PackFullBlock(bits, q, len, out);
    } else {
      detail::PackCodes(bits, q, len, out);
    }
    scales[blk] = s;
    detail::DecodeAdd(q, len, s, replica + b0);
  }
  return nonfinite;
}

LOCO_CPU_CLONES uint64_t QuantizeDeltaBlocks(const float* target, float* replica, size_t n,
                                             int bits, int block_size, uint8_t* codes,
                                             float* scales) {
  return QuantizeDeltaBody(target, replica, n, bits, block_size, codes, scales);
}

Status ValidateDequantizeCall(const char* name, const uint8_t* codes, const float* scales,
                              size_t n, int bits, int block_size, const float* out) {
  LOCO_RETURN_IF_ERROR(ValidateQuantizeParams(bits, block_size));
  if (n > 0 && (codes == nullptr || scales == nullptr || out == nullptr)) {
    return InvalidArgument(std::string(name) + " of " + std::to_string(n) +
                           " elements needs non-null codes, scales and out");
  }
  return Status::Ok();
}

}  // namespace

namespace detail {

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) uint64_t QuantizeDeltaAvx2(const float* target, float* replica,
                                                           size_t n, int bits, int block_size,
                                                           uint8_t* codes, float* scales) {
  return QuantizeDeltaBody(target, replica, n, bits, block_size, codes, scales);
}
#else
uint64_t QuantizeDeltaAvx2(const float*, float*, size_t, int, int, uint8_t*, float*) { return 0; }
#endif

}  // namespace detail

Status Quantize(const float* x, size_t n, const QuantizeParams& p, uint8_t* codes, float* scales,
                QuantizeStats* stats) {
  LOCO_RETURN_IF_ERROR(ValidateQuantizeCall(x, n, p, codes, scales));
  const uint64_t nonfinite = QuantizeBlocks(x, n, p, codes, scales);
  if (stats != nullptr) stats->nonfinite = nonfinite;
  return Status::Ok();
}

Status Dequantize(const uint8_t* codes, const float* scales, size_t n, int bits, int block_size,
                  float* out) {
  LOCO_RETURN_IF_ERROR(
      ValidateDequantizeCall("Dequantize", codes, scales, n, bits, block_size, out));
  DequantizeBlocks(codes, scales, n, bits, block_size, /*add=*/false, out);
  return Status::Ok();
}

Status DequantizeAdd(const uint8_t* codes, const float* scales, size_t n, int bits, int block_size,
                     float* out) {
  LOCO_RETURN_IF_ERROR(
      ValidateDequantizeCall("DequantizeAdd", codes, scales, n, bits, block_size, out));
  DequantizeBlocks(codes, scales, n, bits, block_size, /*add=*/true, out);
  return Status::Ok();
}

Status QuantizeDeltaAdd(const float* target, float* replica, size_t n, int bits, int block_size,
                        uint8_t* codes, float* scales, QuantizeStats* stats) {
  LOCO_RETURN_IF_ERROR(ValidateQuantizeParams(bits, block_size));
  if (n > 0 && (target == nullptr || replica == nullptr || codes == nullptr ||
                scales == nullptr)) {
    return InvalidArgument("QuantizeDeltaAdd of " + std::to_string(n) +
                           " elements needs non-null target, replica, codes and scales");
  }
  const uint64_t nonfinite =
      QuantizeDeltaBlocks(target, replica, n, bits, block_size, codes, scales);
  if (stats != nullptr) stats->nonfinite = nonfinite;
  return Status::Ok();
}

}  // namespace cpu
}  // namespace loco

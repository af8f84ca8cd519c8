// Server-side decode-and-accumulate: out = (1/n) Σ_i D(payload_i), in fp32
// (so sums of low-bit codes never overflow).
//
// Every payload is validated before `out` is written: matching length,
// supported codec/bits/block size, buffer sizes that match, finite scales.
// On error nothing is written.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace loco {

enum class PayloadCodec { kFp32, kBf16, kBlockQuant };

// A non-owning view of one worker's payload for a range of `length` elements.
struct PayloadView {
  PayloadCodec codec = PayloadCodec::kBlockQuant;
  int bits = 4;           // kBlockQuant only
  int block_size = 128;   // kBlockQuant only
  const uint8_t* data = nullptr;   // codes (kBlockQuant), raw fp32 or bf16 (little-endian)
  size_t data_bytes = 0;
  const float* scales = nullptr;   // kBlockQuant only
  size_t num_scales = 0;
};

// Checks one payload against `length` elements: codec, bits/block size,
// data_bytes == expected, num_scales == NumBlocks, every scale finite and
// >= 0, fp32 data finite.
Status ValidatePayload(const PayloadView& p, size_t length);

namespace cpu {

// Validates all payloads first, then out[length] = mean of their decodings.
// n >= 1.
Status DecodeAccumulate(const PayloadView* payloads, size_t n, size_t length, float* out);

// Where a DecodeAccumulateRange may start: a multiple of this many elements
// (every block size is a multiple of it, and a 2-bit code at such an index
// starts a byte).
inline constexpr size_t kDecodeRangeAlign = 32;

// Elements [begin, begin + count) of DecodeAccumulate's result, into
// out[0, count): bit for bit what the whole call writes there, so that a
// caller can consume the mean piece by piece (in cache) instead of holding
// all of it. Precondition: every payload passed ValidatePayload(p, length)
// (checking scales is O(length), so it is not repeated per piece). Checked:
// n >= 1, begin % kDecodeRangeAlign == 0, begin + count <= length.
Status DecodeAccumulateRange(const PayloadView* payloads, size_t n, size_t length, size_t begin,
                             size_t count, float* out);

}  // namespace cpu

namespace cuda {

// Payload data/scales are device pointers; validation of scales happens on
// device and the call synchronises `stream` before returning.
Status DecodeAccumulate(const PayloadView* payloads, size_t n, size_t length, float* out,
                        void* stream);

}  // namespace cuda
}  // namespace loco

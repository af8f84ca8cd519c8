// The bytes that the first `n` elements of a payload take in its data and
// in its scales, by its codec (proto/loco.proto, kernels/quantize.h): the
// offsets at which a part of a payload starts when it is sent in parts.
// Precondition: `n` is a multiple of the block size, or the payload's
// length; the codec, bits and block size are valid (checked by the caller).
#pragma once

#include <cstddef>

#include "kernels/quantize.h"
#include "proto/loco.pb.h"

namespace loco {

inline size_t PayloadDataBytes(const v1::Payload& p, size_t n) {
  switch (p.codec()) {
    case v1::CODEC_FP32: return 4 * n;
    case v1::CODEC_BF16: return 2 * n;
    default: return PackedBytes(n, static_cast<int>(p.bits()));
  }
}

inline size_t PayloadScaleBytes(const v1::Payload& p, size_t n) {
  if (p.codec() != v1::CODEC_BLOCK_QUANT) return 0;
  return sizeof(float) * NumBlocks(n, static_cast<int>(p.block_size()));
}

}  // namespace loco

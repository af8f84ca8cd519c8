// Applies the parameters a Pull returned to the worker's copy of one shard:
// a full copy (CODEC_FP32, CODEC_BF16) replaces the slice; a delta
// (CODEC_BLOCK_QUANT, is_delta) is decoded and added to it.
//
// Everything is validated before the slice is written (range, codec, sizes,
// finite scales and values, delta base version); on error the slice is left
// unchanged.
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"
#include "proto/loco.pb.h"

namespace loco {

// `slice` is the worker's copy of the shard [offset, offset + slice.size());
// `have_version` the version it currently holds (meaningful when have_any).
// Returns the number of wire bytes (data + scales) consumed.
StatusOr<size_t> ApplyPulledParams(const v1::PullResponse& response, uint64_t offset,
                                   bool have_any, uint64_t have_version,
                                   std::span<float> slice);

}  // namespace loco

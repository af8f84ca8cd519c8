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
#include <vector>

#include "common/status.h"
#include "proto/loco.pb.h"

namespace loco {

// A pull answer whose body may lie in pieces (gRPC's receive slices, see
// client/pulled_response.h). `header` gives every field but the payload's
// data and scales, which are read from `data` (pieces of any size, in
// order, together the data bytes) and `scales` (little-endian fp32, any
// alignment) instead. Non-owning.
struct PulledParamsView {
  const v1::PullResponse* header = nullptr;
  std::span<const uint8_t> scales;
  std::span<const std::span<const uint8_t>> data;
};

// `slice` is the worker's copy of the shard [offset, offset + slice.size());
// `have_version` the version it currently holds (meaningful when have_any).
// Returns the number of wire bytes (data + scales) consumed.
[[nodiscard]] StatusOr<size_t> ApplyPulledParams(const PulledParamsView& pulled, uint64_t offset,
                                                 bool have_any, uint64_t have_version,
                                                 std::span<float> slice);

// The same for a parsed message: its payload's data and scales are the body.
[[nodiscard]] StatusOr<size_t> ApplyPulledParams(const v1::PullResponse& response,
                                                 uint64_t offset, bool have_any,
                                                 uint64_t have_version, std::span<float> slice);

}  // namespace loco

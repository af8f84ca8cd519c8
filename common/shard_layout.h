// The shard map: how the flat parameter vector is cut into contiguous shards.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace loco {

struct ShardRange {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Cuts [0, total_elements) into `num_shards` contiguous ranges whose
// boundaries are multiples of `align` (so quantization blocks whose size
// divides `align` never straddle a boundary). The vector is cut into
// ceil(total / align) aligned blocks (the last one may be short) and each
// shard gets floor or ceil of blocks / num_shards of them, the larger ones
// first; the last shard ends at total_elements.
//
// Every shard is non-empty: a model with fewer aligned blocks than shards is
// an error (InvalidArgument naming the smallest size that would work), not a
// map with empty shards, because an empty shard would make every worker push
// and pull zero-length payloads for nothing. `align` must be a multiple of 32,
// total_elements and num_shards at least 1.
StatusOr<std::vector<ShardRange>> MakeShardMap(uint64_t total_elements, uint32_t num_shards,
                                               uint32_t align);

}  // namespace loco

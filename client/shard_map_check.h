// CheckShardMap: whether the coordinator's shard map is one this worker can
// train with. Join refuses the cluster otherwise, before opening any channel.
#pragma once

#include <cstddef>

#include "client/worker_options.h"
#include "common/status.h"
#include "proto/loco.pb.h"

namespace loco {

// OK when `map` covers exactly `num_elements` with contiguous, non-empty
// shards in id order, each with an address; for the block codecs, when
// options.block_size divides the map's alignment and every shard's offset
// (blocks never straddle a shard boundary); and when a full fp32 copy of
// every shard fits in options.max_message_bytes. Otherwise:
// FailedPrecondition for a model of another size, DataLoss for a map that
// is not a partition, InvalidArgument for what this worker's options could
// fix (the message says which).
[[nodiscard]] Status CheckShardMap(const v1::ShardMap& map, size_t num_elements,
                                   const WorkerOptions& options);

}  // namespace loco

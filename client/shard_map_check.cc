#include "client/shard_map_check.h"

#include <cstdint>
#include <string>

namespace loco {
namespace {

// One shard's entry: the next contiguous, non-empty one, aligned for the
// block codecs, small enough to pull whole.
Status CheckShard(const v1::ShardMap& map, int i, uint64_t expect, bool block_codec,
                  const WorkerOptions& options) {
  const v1::ShardInfo& s = map.shards(i);
  if (s.shard_id() != static_cast<uint32_t>(i) || s.offset() != expect || s.length() == 0 ||
      s.address().empty()) {
    return DataLoss("shard map entry " + std::to_string(i) + " (id " +
                    std::to_string(s.shard_id()) + ", offset " + std::to_string(s.offset()) +
                    ", length " + std::to_string(s.length()) + ", address '" + s.address() +
                    "') is not the next contiguous, non-empty shard starting at " +
                    std::to_string(expect));
  }
  if (block_codec && s.offset() % static_cast<uint64_t>(options.block_size) != 0) {
    return InvalidArgument(
        "shard " + std::to_string(i) + " starts at " + std::to_string(s.offset()) +
        ", not a multiple of this worker's block_size " + std::to_string(options.block_size) +
        " (the shard map aligns to " + std::to_string(map.block_size()) +
        "); use a block size that divides it");
  }
  // Payload fields and framing add a few bytes to the raw fp32 copy.
  if (s.length() * 4 + 4096 > options.max_message_bytes) {
    return InvalidArgument("shard " + std::to_string(i) + " holds " +
                           std::to_string(s.length()) + " elements; a full fp32 copy does not "
                           "fit in max_message_bytes = " +
                           std::to_string(options.max_message_bytes) + "; raise it");
  }
  return Status::Ok();
}

}  // namespace

Status CheckShardMap(const v1::ShardMap& map, size_t num_elements, const WorkerOptions& options) {
  if (map.total_elements() != num_elements) {
    return FailedPrecondition("the cluster's model has " + std::to_string(map.total_elements()) +
                              " elements but this worker's has " +
                              std::to_string(num_elements) +
                              "; every worker must train the same model");
  }
  if (map.shards_size() == 0) return DataLoss("the coordinator's shard map has no shards");
  const bool block_codec = IsBlockCodec(options.codec);
  const uint32_t block = static_cast<uint32_t>(options.block_size);
  if (block_codec && (map.block_size() == 0 || map.block_size() % block != 0)) {
    return InvalidArgument("this worker's block_size " + std::to_string(block) +
                           " does not divide the shard map's alignment " +
                           std::to_string(map.block_size()) +
                           " (blocks would straddle shard boundaries); use a block size that "
                           "divides it");
  }
  uint64_t expect = 0;
  for (int i = 0; i < map.shards_size(); ++i) {
    LOCO_RETURN_IF_ERROR(CheckShard(map, i, expect, block_codec, options));
    expect += map.shards(i).length();
  }
  if (expect != num_elements) {
    return DataLoss("the shard map covers " + std::to_string(expect) + " of " +
                    std::to_string(num_elements) + " elements");
  }
  return Status::Ok();
}

}  // namespace loco

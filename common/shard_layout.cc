#include "common/shard_layout.h"

#include <string>

namespace loco {

StatusOr<std::vector<ShardRange>> MakeShardMap(uint64_t total_elements, uint32_t num_shards,
                                               uint32_t align) {
  if (num_shards == 0) return InvalidArgument("num_shards is 0; need at least 1 shard");
  if (align == 0 || align % 32 != 0) {
    return InvalidArgument("shard alignment " + std::to_string(align) +
                           " is not a positive multiple of 32");
  }
  if (total_elements == 0) return InvalidArgument("total_elements is 0; a model needs >= 1 element");
  const uint64_t blocks = (total_elements + align - 1) / align;
  if (blocks < num_shards) {
    return InvalidArgument("a model of " + std::to_string(total_elements) + " elements has " +
                           std::to_string(blocks) + " aligned blocks of " + std::to_string(align) +
                           ", fewer than the " + std::to_string(num_shards) +
                           " shards; use fewer servers, a smaller shard alignment, or a model of "
                           "more than " + std::to_string((num_shards - 1) * uint64_t{align}) +
                           " elements");
  }
  const uint64_t base = blocks / num_shards, extra = blocks % num_shards;
  std::vector<ShardRange> shards(num_shards);
  uint64_t offset = 0;
  for (uint32_t k = 0; k < num_shards; ++k) {
    const uint64_t n_blocks = base + (k < extra ? 1 : 0);
    const uint64_t end = k + 1 == num_shards ? total_elements : offset + n_blocks * align;
    shards[k] = {offset, end - offset};
    offset = end;
  }
  return shards;
}

}  // namespace loco

#include <gtest/gtest.h>

#include "common/shard_layout.h"

namespace loco {
namespace {

// Checks the map's invariants independently of how it was computed.
void ExpectValidMap(uint64_t total, uint32_t shards, uint32_t align) {
  SCOPED_TRACE("total=" + std::to_string(total) + " shards=" + std::to_string(shards) +
               " align=" + std::to_string(align));
  auto map = MakeShardMap(total, shards, align);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_EQ(map->size(), shards);
  uint64_t next = 0, min_blocks = UINT64_MAX, max_blocks = 0;
  for (const auto& r : *map) {
    EXPECT_EQ(r.offset, next);           // contiguous
    EXPECT_EQ(r.offset % align, 0u);     // aligned boundary
    EXPECT_GT(r.length, 0u);             // no empty shard
    next = r.offset + r.length;
    const uint64_t blocks = (r.length + align - 1) / align;
    min_blocks = std::min(min_blocks, blocks);
    max_blocks = std::max(max_blocks, blocks);
  }
  EXPECT_EQ(next, total);                // covers everything
  EXPECT_LE(max_blocks - min_blocks, 1u);  // as even as alignment allows
}

TEST(ShardLayout, AlignedContiguousCoveringAndEven) {
  for (uint64_t total : {1ull, 31ull, 128ull, 1000ull, 4097ull, 12345ull, 1000003ull}) {
    for (uint32_t shards : {1u, 2u, 3u, 7u}) {
      for (uint32_t align : {32u, 128u, 4096u}) {
        if ((total + align - 1) / align < shards) continue;
        ExpectValidMap(total, shards, align);
      }
    }
  }
}

TEST(ShardLayout, OddSizesGiveTheRaggedTailToTheLastShard) {
  // 1000 = 7 full blocks of 128 + 104; 8 blocks over 3 shards: 3, 3, 2.
  auto map = MakeShardMap(1000, 3, 128);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ((*map)[0].offset, 0u);
  EXPECT_EQ((*map)[0].length, 384u);
  EXPECT_EQ((*map)[1].offset, 384u);
  EXPECT_EQ((*map)[1].length, 384u);
  EXPECT_EQ((*map)[2].offset, 768u);
  EXPECT_EQ((*map)[2].length, 232u);
}

TEST(ShardLayout, RefusesMapsThatWouldNeedEmptyShards) {
  auto tiny = MakeShardMap(200, 3, 128);  // 2 blocks, 3 shards
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("fewer than the 3 shards"), std::string::npos);
  EXPECT_TRUE(MakeShardMap(257, 3, 128).ok());  // 3 blocks: just enough
  EXPECT_EQ(MakeShardMap(0, 1, 128).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeShardMap(100, 0, 128).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeShardMap(100, 1, 100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeShardMap(100, 1, 0).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loco

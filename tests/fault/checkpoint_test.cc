// Checkpointer: atomic files that round-trip exactly, and a loader that skips
// corrupt or truncated files and falls back to the previous checkpoint.
#include "server/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

namespace loco {
namespace {

namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  const std::string dir = std::string(::testing::TempDir()) + "/ckpt-" + name + "-" +
                          std::to_string(::getpid());
  fs::remove_all(dir);
  return dir;
}

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

ShardCheckpoint Make(uint32_t shard, uint64_t version, bool replica, uint32_t seed) {
  ShardCheckpoint c;
  c.shard_id = shard;
  c.range = ShardRange{4096 * shard, 1000};
  c.version = version;
  c.params = Random(1000, seed);
  c.m = Random(1000, seed + 1);
  c.v = Random(1000, seed + 2);
  if (replica) c.replica = Random(1000, seed + 3);
  return c;
}

void ExpectSame(const ShardCheckpoint& a, const ShardCheckpoint& b) {
  EXPECT_EQ(a.shard_id, b.shard_id);
  EXPECT_EQ(a.range.offset, b.range.offset);
  EXPECT_EQ(a.range.length, b.range.length);
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.total_elements, b.total_elements);
  EXPECT_EQ(a.params, b.params);  // bit-exact: the file holds the fp32 bytes
  EXPECT_EQ(a.m, b.m);
  EXPECT_EQ(a.v, b.v);
  EXPECT_EQ(a.replica, b.replica);
}

TEST(Checkpoint, RoundTripIsExactWithAndWithoutReplica) {
  CheckpointOptions o;
  o.dir = FreshDir("roundtrip");
  Checkpointer ck(o);
  ASSERT_TRUE(ck.Prepare().ok());
  for (bool replica : {false, true}) {
    const ShardCheckpoint c = Make(1, replica ? 20 : 10, replica, 7);
    auto path = ck.Write(c);
    ASSERT_TRUE(path.ok()) << path.status().ToString();
    EXPECT_EQ(fs::path(*path).filename().string(), Checkpointer::FileName(1, c.version));
    auto back = Checkpointer::ReadFile(*path);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ExpectSame(c, *back);
  }
  std::string loaded;
  auto newest = ck.LoadNewest(1, &loaded, nullptr);
  ASSERT_TRUE(newest.has_value());
  EXPECT_EQ(newest->version, 20u);
  EXPECT_EQ(loaded, (fs::path(o.dir) / Checkpointer::FileName(1, 20)).string());
  // Another shard's files in the same folder are not this shard's.
  EXPECT_FALSE(ck.LoadNewest(0, nullptr, nullptr).has_value());
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(o.dir)) {
    EXPECT_EQ(e.path().extension(), ".ckpt") << e.path();
  }
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// `bytes` with its last four bytes made the zlib CRC-32 of the rest again.
void WriteWithCrc(const std::string& path, std::string bytes) {
  const uint32_t crc = static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0),
                                                   reinterpret_cast<const Bytef*>(bytes.data()),
                                                   static_cast<uInt>(bytes.size() - 4)));
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The header after the magic: format at 8, then shard id, offset, length,
// version, replica length (from 16 to 48), then format 2's model size.
constexpr size_t kFormatAt = 8, kTotalAt = 48;

// The model's size round-trips, and a file of the format before it (no
// model size) still loads, with a size of 0 (unknown): a server upgraded
// in place resumes from the checkpoints it wrote before.
TEST(Checkpoint, TheModelSizeRoundTripsAndAFormatOneFileLoadsWithoutIt) {
  CheckpointOptions o;
  o.dir = FreshDir("model-size");
  Checkpointer ck(o);
  ASSERT_TRUE(ck.Prepare().ok());
  ShardCheckpoint c = Make(1, 7, true, 5);
  c.total_elements = 8192;
  auto path = ck.Write(c);
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  auto back = Checkpointer::ReadFile(*path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSame(c, *back);

  std::string bytes = ReadBytes(*path);
  ASSERT_GT(bytes.size(), kTotalAt + 8);
  uint64_t total = 0;
  std::memcpy(&total, bytes.data() + kTotalAt, 8);
  ASSERT_EQ(total, 8192u) << "the layout this test assumes";
  bytes.erase(kTotalAt, 8);
  const uint32_t format_one = 1;
  std::memcpy(bytes.data() + kFormatAt, &format_one, 4);
  WriteWithCrc(*path, bytes);
  auto old = Checkpointer::ReadFile(*path);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  c.total_elements = 0;
  ExpectSame(c, *old);
}

// A range that ends past the model is refused when written, and when read
// (a file whose checksum holds but whose header does not add up).
TEST(Checkpoint, ARangePastTheModelsEndIsRefused) {
  CheckpointOptions o;
  o.dir = FreshDir("past-the-end");
  Checkpointer ck(o);
  ASSERT_TRUE(ck.Prepare().ok());
  ShardCheckpoint c = Make(1, 7, false, 5);  // [4096, 5096)
  c.total_elements = 5000;
  auto refused = ck.Write(c);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("ends past the model of 5000 elements"),
            std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(ck.List(1).empty()) << "nothing written";

  c.total_elements = 5096;  // just fits
  auto path = ck.Write(c);
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  std::string bytes = ReadBytes(*path);
  const uint64_t too_small = 5095;
  std::memcpy(bytes.data() + kTotalAt, &too_small, 8);
  WriteWithCrc(*path, bytes);
  auto bad = Checkpointer::ReadFile(*path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("implausible header"), std::string::npos)
      << bad.status().ToString();
}

// The fuzzer's seeds (fuzz/make_corpus.py writes them without this code:
// a mode byte, then a checkpoint file) are valid checkpoints of both
// formats, so that checkpoint_fuzz starts from files this parser accepts;
// each serializes back to itself when of the newest format.
TEST(Checkpoint, TheFuzzersSeedsParse) {
  const fs::path seeds = fs::path(LOCO_SOURCE_DIR) / "fuzz/corpus/checkpoint_fuzz";
  int newest = 0, oldest = 0;
  for (const auto& e : fs::directory_iterator(seeds)) {
    const std::string file = ReadBytes(e.path().string()).substr(1);
    auto c = Checkpointer::Parse(file);
    ASSERT_TRUE(c.ok()) << e.path() << ": " << c.status().ToString();
    uint32_t format = 0;
    std::memcpy(&format, file.data() + kFormatAt, 4);
    if (format == 2) {
      ++newest;
      auto again = Checkpointer::Serialize(*c);
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(*again, file) << e.path();
    } else {
      ++oldest;
    }
  }
  EXPECT_GE(newest, 1);
  EXPECT_GE(oldest, 1);
}

TEST(Checkpoint, CorruptNewestFallsBackToThePreviousAndSaysWhy) {
  CheckpointOptions o;
  o.dir = FreshDir("corrupt");
  Checkpointer ck(o);
  ASSERT_TRUE(ck.Prepare().ok());
  const ShardCheckpoint older = Make(0, 100, true, 1);
  ASSERT_TRUE(ck.Write(older).ok());
  auto newest_path = ck.Write(Make(0, 200, true, 2));
  ASSERT_TRUE(newest_path.ok());
  {
    // Flip one byte in the middle of the parameters.
    std::fstream f(*newest_path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(200);
    char b = 0;
    f.read(&b, 1);
    b = static_cast<char>(b ^ 0x5a);
    f.seekp(200);
    f.write(&b, 1);
  }
  std::vector<std::string> skipped;
  std::string loaded;
  auto c = ck.LoadNewest(0, &loaded, &skipped);
  ASSERT_TRUE(c.has_value());
  ExpectSame(older, *c);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find(*newest_path), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[0].find("checksum"), std::string::npos) << skipped[0];
}

TEST(Checkpoint, TruncatedFileIsSkipped) {
  CheckpointOptions o;
  o.dir = FreshDir("truncated");
  Checkpointer ck(o);
  ASSERT_TRUE(ck.Prepare().ok());
  const ShardCheckpoint older = Make(2, 5, false, 3);
  ASSERT_TRUE(ck.Write(older).ok());
  auto newest_path = ck.Write(Make(2, 6, false, 4));
  ASSERT_TRUE(newest_path.ok());
  fs::resize_file(*newest_path, fs::file_size(*newest_path) - 100);
  std::vector<std::string> skipped;
  auto c = ck.LoadNewest(2, nullptr, &skipped);
  ASSERT_TRUE(c.has_value());
  ExpectSame(older, *c);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("truncated"), std::string::npos) << skipped[0];

  // A file cut inside the header, and one that is not a checkpoint at all.
  fs::resize_file(*newest_path, 10);
  EXPECT_FALSE(Checkpointer::ReadFile(*newest_path).ok());
  std::ofstream(*newest_path, std::ios::trunc) << "hello, not a checkpoint at all, not at all";
  auto bad = Checkpointer::ReadFile(*newest_path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
}

TEST(Checkpoint, KeepsTheNewestNAndLoadsNothingWhenAllAreBad) {
  CheckpointOptions o;
  o.dir = FreshDir("keep");
  o.keep = 2;
  Checkpointer ck(o);
  ASSERT_TRUE(ck.Prepare().ok());
  for (uint64_t v : {10, 20, 30, 40, 50}) ASSERT_TRUE(ck.Write(Make(3, v, false, 9)).ok());
  ASSERT_TRUE(ck.Write(Make(4, 99, false, 9)).ok());  // another shard: not pruned by shard 3
  const std::vector<std::string> kept = ck.List(3);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(fs::path(kept[0]).filename().string(), Checkpointer::FileName(3, 50));
  EXPECT_EQ(fs::path(kept[1]).filename().string(), Checkpointer::FileName(3, 40));
  EXPECT_EQ(ck.List(4).size(), 1u);

  for (const auto& p : kept) fs::resize_file(p, 3);
  std::vector<std::string> skipped;
  EXPECT_FALSE(ck.LoadNewest(3, nullptr, &skipped).has_value());
  EXPECT_EQ(skipped.size(), 2u);
}

TEST(Checkpoint, VersionsSortNumericallyNotAsText) {
  // 9 < 10 must hold for the newest-first order (zero-padded names).
  EXPECT_LT(Checkpointer::FileName(0, 9), Checkpointer::FileName(0, 10));
  EXPECT_LT(Checkpointer::FileName(0, 99999), Checkpointer::FileName(0, 100000));
}

TEST(Checkpoint, InvalidOptionsAndUnwritableFolderAreRefused) {
  CheckpointOptions o;
  o.keep = 0;
  EXPECT_FALSE(Checkpointer::ValidateOptions(o).ok());
  o.keep = 1;
  o.dir = "/proc/loco-cannot-create-here";
  Status s = Checkpointer(o).Prepare();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--checkpoint-dir"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace loco

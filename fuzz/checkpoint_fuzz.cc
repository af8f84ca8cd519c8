// Fuzz target: bytes -> Checkpointer::Parse, what a restarted server reads
// from --checkpoint-dir (a file cut short by a full disk, a bit flipped on
// the way, another program's file).
//
// Input: a mode byte, then the file. With the mode's low bit set the
// target first makes the file's last four bytes the CRC-32 of the rest, so
// that mutations get past the checksum to the header's and the body's
// checks (without it, only the seeds themselves would).
//
// Invariants (a violation aborts, which libFuzzer reports as a crash):
// * no crash, no sanitizer report, whatever the bytes; a refusal is
//   DATA_LOSS with a message;
// * an accepted checkpoint keeps Parse's contract: params, m and v of the
//   range's length, a replica of 0 or that length, a range within a
//   non-zero model size;
// * it serializes again, and parses back to the same values bit for bit;
//   a file of the newest format serializes to exactly its own bytes.
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/require.h"
#include "server/checkpoint.h"

namespace {

using loco::ShardCheckpoint;
using loco::fuzz::Require;

constexpr size_t kFormatAt = 8;  // after the magic
constexpr uint32_t kNewestFormat = 2;

bool SameFloats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool Same(const ShardCheckpoint& a, const ShardCheckpoint& b) {
  return a.shard_id == b.shard_id && a.range.offset == b.range.offset &&
         a.range.length == b.range.length && a.version == b.version &&
         a.total_elements == b.total_elements && SameFloats(a.params, b.params) &&
         SameFloats(a.m, b.m) && SameFloats(a.v, b.v) && SameFloats(a.replica, b.replica);
}

// `file` with its last four bytes the CRC-32 of the rest, as Write makes them.
void FixChecksum(std::string* file) {
  if (file->size() < 4) return;
  const uInt n = static_cast<uInt>(file->size() - 4);
  const uint32_t crc = static_cast<uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(file->data()), n));
  std::memcpy(file->data() + n, &crc, sizeof(crc));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) FixChecksum(&file);
  const std::string_view bytes = file;
  auto parsed = loco::Checkpointer::Parse(bytes);
  if (!parsed.ok()) {
    Require(parsed.status().code() == loco::StatusCode::kDataLoss,
            "a refusal that is not DATA_LOSS");
    Require(!parsed.status().message().empty(), "a refusal without a message");
    return 0;
  }
  const ShardCheckpoint& c = *parsed;
  const uint64_t n = c.range.length;
  Require(c.params.size() == n && c.m.size() == n && c.v.size() == n,
          "params, m or v not of the range's length");
  Require(c.replica.empty() || c.replica.size() == n, "a replica of another length");
  Require(c.total_elements == 0 || c.range.offset + n <= c.total_elements,
          "a range past the model's end");
  auto serialized = loco::Checkpointer::Serialize(c);
  Require(serialized.ok(), "an accepted checkpoint does not serialize");
  auto again = loco::Checkpointer::Parse(*serialized);
  Require(again.ok(), "a serialized checkpoint does not parse");
  Require(Same(c, *again), "a checkpoint changed through serialize and parse");
  uint32_t format = 0;  // a parsed file is longer than its header
  std::memcpy(&format, bytes.data() + kFormatAt, sizeof(format));
  if (format == kNewestFormat) {
    Require(*serialized == bytes, "a newest-format file serializes to other bytes");
  }
  return 0;
}

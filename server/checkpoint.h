// Checkpointer: a shard's state on disk, written atomically and verified on
// load, so that a restarted server resumes where its last checkpoint left it.
//
// One file per checkpoint, named shard-<id>-v<version, 20 digits>.ckpt in
// `dir`, so that the names sort by version. Layout (little-endian):
//
//   "LOCOCKPT" | u32 format (2) | u32 shard_id | u64 offset | u64 length |
//   u64 version | u64 replica_length (0 or length) | u64 total_elements |
//   params, m, v: length fp32 each | replica: replica_length fp32 |
//   u32 CRC-32 (zlib) of every byte before it
//
// Format 1 (no total_elements) is still read, with total_elements 0.
// total_elements is the model's size, so that a restarted server reports
// it when it registers and the coordinator checks its range against the
// layout (or, restarted too, learns the model size from it) before the
// shard serves.
//
// The AdamW hyper-parameters are not stored: a checkpoint holds only
// applied steps, and every push of a later step brings that step's
// hyper-parameters again (PushRequest.hyper, or the restarted server's
// flags for a push without them).
//
// Writing: a temporary file in `dir` (.shard-<id>-*.tmp), write, fsync, rename
// onto the final name, fsync the directory; then all but the newest `keep`
// checkpoints of the shard are deleted. A crash at any point leaves either
// the old set or the new file complete, never a half-written .ckpt.
//
// Loading: the newest file that parses, has the right size and checksum and
// belongs to the shard wins; every file skipped is logged with its name and
// why, so an operator sees a corrupt or truncated checkpoint.
//
// Thread-compatible: one Checkpointer per shard; Write and LoadNewest are not
// called concurrently on the same object.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/shard_layout.h"
#include "common/status.h"

namespace loco {

// Everything a shard needs to resume: the optimizer state and the return
// path's replica W of what the workers hold (its error state is P - W).
struct ShardCheckpoint {
  uint32_t shard_id = 0;
  ShardRange range;
  uint64_t version = 0;
  // The model's size; 0 when not known (a format-1 file, or a shard whose
  // restored range the coordinator has not confirmed). When not 0, the range
  // lies within it.
  uint64_t total_elements = 0;
  std::vector<float> params, m, v;
  std::vector<float> replica;  // empty unless the delta return path runs
};

struct CheckpointOptions {
  std::string dir;         // empty = checkpoints off
  uint64_t every = 100;    // K: write after every K-th step (0 = only on shutdown)
  uint32_t keep = 3;       // N: newest checkpoints kept per shard (>= 1)
};

class Checkpointer {
 public:
  explicit Checkpointer(CheckpointOptions options) : options_(std::move(options)) {}
  static Status ValidateOptions(const CheckpointOptions& options);

  // Creates `dir` if missing. FailedPrecondition when it cannot be created
  // or written (the message names the folder).
  Status Prepare() const;
  // Writes `c` atomically (see above), then prunes. Returns the final path.
  StatusOr<std::string> Write(const ShardCheckpoint& c) const;
  // The newest valid checkpoint of `shard_id`, or nullopt when there is none.
  // `*loaded_path` (nullable) receives its path; `*skipped` (nullable)
  // receives "path: why" for every file passed over.
  std::optional<ShardCheckpoint> LoadNewest(uint32_t shard_id, std::string* loaded_path,
                                            std::vector<std::string>* skipped) const;
  // Final checkpoint paths of `shard_id`, newest first.
  std::vector<std::string> List(uint32_t shard_id) const;

  // Parses one checkpoint file; DataLoss names what is wrong with it.
  static StatusOr<ShardCheckpoint> ReadFile(const std::string& path);
  // The same, of a file's bytes (any bytes: fuzz/checkpoint_fuzz.cc). A
  // checkpoint it returns has params, m and v of the range's length, a
  // replica of 0 or that length, and a range within a non-zero model size.
  static StatusOr<ShardCheckpoint> Parse(std::string_view bytes);
  // A checkpoint's file bytes in the newest format (the layout above).
  // InvalidArgument when the vectors' sizes differ from the range's length,
  // or the range ends past a non-zero model size (Write refuses the same).
  static StatusOr<std::string> Serialize(const ShardCheckpoint& c);
  static std::string FileName(uint32_t shard_id, uint64_t version);

  const CheckpointOptions& options() const { return options_; }

 private:
  void Prune(uint32_t shard_id) const;

  CheckpointOptions options_;
};

}  // namespace loco

// PulledParts: a pull answered in parts (ParameterServer.PullStream, see
// v1::PullChunk) put back together on the worker.
//
// The first chunk's header (every field of the answer but the payload's
// data and scales) fixes the sizes of both: CODEC_FP32 4 bytes per element,
// CODEC_BF16 2, CODEC_BLOCK_QUANT its packed codes and one fp32 scale per
// block. Every chunk's data and scales go to their offsets, in any order;
// Finish checks that they covered both exactly. Whether the answer fits
// the worker's copy (range, base version, finite values) is
// ApplyPulledParams's check, on view().
//
// Refused, at the chunk that shows it: a first chunk without a header, a
// header in a later chunk, a header whose payload carries data or scales,
// whose codec, bits or block size cannot size the buffers, or whose length
// is 0 or more than the shard holds; a later chunk with neither data nor
// scales; a piece outside its buffer or overlapping one already placed.
//
// Chunks are read straight from gRPC's receive buffer (Add(ByteBuffer), as
// protobuf would read a v1::PullChunk: fields in any order, the last value
// of a field wins, unknown fields skipped; DataLoss for what its parser
// would reject): each piece is copied once, from the received slices to
// its place. The buffers keep their size and capacity across answers of
// the same shape, so they are neither reallocated nor cleared per pull.
// Not thread-safe; one per shard, reused by the thread that pulls it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "common/status.h"
#include "proto/loco.pb.h"
#include "rpc/placed_ranges.h"
#include "client/param_payload_decoder.h"

namespace loco {

class PulledParts {
 public:
  // Starts a new answer for a shard of `max_length` elements.
  void Reset(uint64_t max_length);
  // Takes one chunk (its bytes are copied into place): serialized, as
  // received, or parsed.
  [[nodiscard]] Status Add(const grpc::ByteBuffer& chunk);
  [[nodiscard]] Status Add(const v1::PullChunk& chunk);
  // OK when a header came and the pieces covered data and scales exactly.
  [[nodiscard]] Status Finish() const;

  const v1::PullResponse& header() const { return header_; }
  // The answer as ApplyPulledParams reads it; valid until the next Reset.
  PulledParamsView view() const;
  size_t chunks() const { return chunks_; }

 private:
  // One chunk's fields; its pieces point into the chunk.
  struct Chunk {
    const v1::PullResponse* header = nullptr;  // null: none
    std::vector<std::span<const uint8_t>> data, scales;
    uint64_t data_offset = 0, scales_offset = 0;
  };
  Status AddChunk(const Chunk& chunk);
  // Copies `pieces` to byte `offset` of `*buffer` after `placed` accepted them.
  static Status Place(const std::string& where, const char* what,
                      const std::vector<std::span<const uint8_t>>& pieces, uint64_t offset,
                      std::string* buffer, PlacedRanges* placed);

  uint64_t max_length_ = 0;
  size_t chunks_ = 0;
  v1::PullResponse header_;
  std::string data_, scales_;
  PlacedRanges data_placed_, scales_placed_;
  std::span<const uint8_t> data_span_;
  // The received chunk's slices and its header (reused).
  std::vector<grpc::Slice> slices_;
  v1::PullResponse chunk_header_;
  std::string header_bytes_;
};

}  // namespace loco

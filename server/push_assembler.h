// PushAssembler: puts a push sent in chunks (v1::PushChunk, see
// ParameterServer.PushStream) back together into the v1::PushRequest a
// unary Push would have carried, byte for byte. Two layouts (the first
// chunk's `placed` picks one):
//
// - In order: the chunks' data, appended in order; the header carries the
//   scales.
// - Placed: the header's gradient (codec, bits, block size, length) fixes
//   the sizes of data and scales, allocated at the first chunk; every chunk
//   puts its data at data_offset and its scales at scales_offset, in any
//   order. An empty piece places nothing (its offset is not read).
//
// A malformed stream is refused at the chunk that shows it, before its
// bytes are kept: a first chunk without a header, a header or `placed` in a
// later chunk, a header whose gradient already carries data, more data
// than any payload of the shard can need; in order, a later chunk with no
// data or a chunk setting a placed field (data_offset, scales,
// scales_offset); placed, a header carrying scales or whose codec, bits,
// block size or length (0, or more elements than the shard holds) do not
// size the buffers, a later chunk with neither data nor scales, or a piece
// outside its buffer or overlapping one already placed. Finish refuses a
// placed stream that left bytes uncovered. Whether the assembled payload is
// valid for the shard is the push's own check (OwnedPayload); this class
// only bounds what a stream can make the server hold.
//
// Not thread-safe: one per stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "common/status.h"
#include "proto/loco.pb.h"
#include "rpc/placed_ranges.h"
#include "server/payload_buffers.h"

namespace loco {

class PushAssembler {
 public:
  // `max_data_bytes`: the most gradient data a push to this shard can
  // carry (4 bytes per element of the shard: fp32). `buffers` (nullable, not
  // owned, must outlive the assembler): where the data buffer comes from.
  // A placed push's buffer is a spare's old bytes until its chunks cover
  // them, and Finish refuses a push that left any uncovered, so no byte of
  // an earlier push reaches a payload.
  explicit PushAssembler(size_t max_data_bytes, PayloadBuffers* buffers = nullptr)
      : max_data_bytes_(max_data_bytes), buffers_(buffers) {}

  // Takes the chunk's header and pieces (`chunk` is left spent).
  // InvalidArgument naming the chunk and what is wrong; after an error
  // every later call fails the same way.
  [[nodiscard]] Status Add(v1::PushChunk* chunk);
  // The assembled request. InvalidArgument when no chunk arrived, an
  // earlier Add failed, or a placed stream left data or scales bytes
  // uncovered (later calls then fail the same way). Leaves the assembler
  // empty.
  [[nodiscard]] StatusOr<v1::PushRequest> Finish();

  size_t chunks() const { return chunks_; }

 private:
  // The data size the header's codec and length (at most `cap` elements)
  // need, or 0 when they are not valid (the push's own check then refuses
  // them with its message).
  static size_t ExpectedDataBytes(const v1::Payload& header, size_t cap);
  // Add's phases. TakeHeader: the first chunk's header becomes the request
  // and picks the layout. CheckLaterChunk: what a later chunk may not
  // carry. PlaceChunk / AppendInOrder: the chunk's bytes into the request,
  // by layout. Each returns the refusal; Add records it (Fail).
  Status TakeHeader(v1::PushChunk* chunk, const std::string& where);
  Status CheckLaterChunk(const v1::PushChunk& chunk, const std::string& where) const;
  Status PlaceChunk(const v1::PushChunk& chunk, const std::string& where);
  Status AppendInOrder(const v1::PushChunk& chunk, const std::string& where);
  // Checks a placed header's gradient and sizes its data and scales.
  Status StartPlaced(const std::string& where);
  // Copies `piece` to byte `offset` of `*buffer` (`what`: "data" or
  // "scales") unless it falls outside it or overlaps a piece received.
  static Status Place(const std::string& where, const char* what, const std::string& piece,
                      uint64_t offset, std::string* buffer, PlacedRanges* received);
  Status Fail(Status s) {
    failed_ = std::move(s);
    return failed_;
  }

  // A buffer for `bytes` of data from buffers_ (or a new one), as the
  // request's data, of unspecified size and contents.
  void TakeDataBuffer(size_t bytes);

  size_t max_data_bytes_;
  PayloadBuffers* buffers_;
  size_t chunks_ = 0;
  bool placed_ = false;
  PlacedRanges data_, scales_;
  v1::PushRequest request_;
  Status failed_;
};

}  // namespace loco

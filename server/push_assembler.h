// PushAssembler: puts a push sent in chunks (v1::PushChunk, see
// ParameterServer.PushStream) back together into the v1::PushRequest a
// unary Push would have carried.
//
// A malformed stream is refused at the chunk that shows it, before its
// bytes are kept: a first chunk without a header, a header in a later
// chunk, a header whose gradient already carries data, a later chunk with
// no data, or more data than any payload of the shard can need. Whether
// the assembled payload is valid for the shard is the push's own check
// (OwnedPayload); this class only bounds what a stream can make the server
// hold.
//
// Not thread-safe: one per stream.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"
#include "proto/loco.pb.h"

namespace loco {

class PushAssembler {
 public:
  // `max_data_bytes`: the most gradient data a push to this shard can
  // carry (4 bytes per element of the shard: fp32).
  explicit PushAssembler(size_t max_data_bytes) : max_data_bytes_(max_data_bytes) {}

  // Takes the chunk's header and data (`chunk` is left spent).
  // InvalidArgument naming the chunk and what is wrong; after an error
  // every later call fails the same way.
  [[nodiscard]] Status Add(v1::PushChunk* chunk);
  // The assembled request. InvalidArgument when no chunk arrived or an
  // earlier Add failed. Leaves the assembler empty.
  [[nodiscard]] StatusOr<v1::PushRequest> Finish();

  size_t chunks() const { return chunks_; }

 private:
  // The data size the header's codec and length (at most `cap` elements)
  // need, or 0 when they are not valid (the push's own check then refuses
  // them with its message).
  static size_t ExpectedDataBytes(const v1::Payload& header, size_t cap);

  size_t max_data_bytes_;
  size_t chunks_ = 0;
  v1::PushRequest request_;
  Status failed_;
};

}  // namespace loco

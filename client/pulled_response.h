// PulledResponse: a Pull's answer read straight from gRPC's receive buffer.
//
// Parsing the answer into a v1::PullResponse copies its body (the payload's
// data, 4 bytes per element for a full copy, ½ or 1 for a delta) out of
// gRPC's slices into a string, and a new string every time: clearing a
// proto3 message deletes its sub-messages, so the body's buffer is freed
// and faulted in again on every pull. This reader keeps the slices and
// hands ApplyPulledParams the data where it lies: one piece per contiguous
// run of a slice, in order. The header fields (version, is_delta, the
// payload's codec, bits, block size, offset and length) are decoded into a
// v1::PullResponse whose payload has no data and no scales; the scales
// (4 bytes per block) are copied into a buffer that keeps its capacity.
//
// The bytes are read as protobuf reads a v1::PullResponse: fields in any
// order, the last value of a repeated scalar wins, a repeated `params` is
// merged into the first, unknown fields (and known fields of another wire
// type) are skipped. What protobuf would reject is rejected: a truncated
// or overlong varint, a length past the end of its message, a field number
// 0, a wire type that is not 0, 1, 2 or 5 (groups are not used by this
// protocol). Check: tests/client/pulled_response_test.cc compares it with
// protobuf's parser on valid, truncated and corrupted answers.
//
// Not thread-safe; a PulledResponse is reused by one thread across pulls.
#pragma once

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "proto/loco.pb.h"
#include "client/param_payload_decoder.h"

namespace loco {

class PulledResponse {
 public:
  // Reads `bytes`: their slices are referenced, not copied, and stay alive
  // until Release or the next Read. On error the reader holds an empty
  // answer.
  [[nodiscard]] Status Read(const grpc::ByteBuffer& bytes);

  // The answer's header: the payload's data and scales are always empty.
  const v1::PullResponse& header() const { return header_; }
  // The answer as ApplyPulledParams reads it; valid until Release or the
  // next Read.
  PulledParamsView view() const;

  // Drops the answer and its slices (the scale buffer keeps its capacity).
  void Release();

 private:

  v1::PullResponse header_;
  std::vector<grpc::Slice> slices_;
  std::vector<uint8_t> scales_;
  std::vector<std::span<const uint8_t>> data_;
};

}  // namespace loco

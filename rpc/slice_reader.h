// SliceReader: reads protobuf's wire format from a message that lies in
// gRPC's receive slices, without joining them: fields' keys and varints
// are decoded, length-delimited bytes are returned as pieces that point
// into the slices (or copied out). The zero-copy readers of pull answers
// (client/pulled_response.h, client/pulled_parts.h) are built on it.
//
// What protobuf's parser would reject is reported (DataLoss, naming the
// message `what` and the byte): a truncated or overlong varint (a value
// over 10 bytes; a field's key or a length over 5 bytes, however small
// the value, since protobuf reads those as 32-bit numbers), a length past
// the end of its message, field number 0, a wire type that is not 0, 1, 2
// or 5 (groups are not used by this protocol).
//
// Not thread-safe; the slices must outlive the reader and its pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <grpcpp/support/slice.h>

#include "common/status.h"

namespace loco::wire {

class SliceReader {
 public:
  // `what` names the message in errors ("PullResponse").
  SliceReader(const std::vector<grpc::Slice>& slices, const char* what);

  size_t position() const { return position_; }

  // A protobuf varint of at most `max_bytes` bytes (10 for a value; keys
  // and lengths are read with kMaxKeyBytes and kMaxLengthBytes).
  [[nodiscard]] Status ReadVarint(uint64_t* value, int max_bytes = 10);
  static constexpr int kMaxKeyBytes = 5;
  static constexpr int kMaxLengthBytes = 5;
  // The next `n` bytes as pieces that point into the slices, appended to
  // *out. Precondition: n bytes remain (ReadField checked the length).
  void Take(size_t n, std::vector<std::span<const uint8_t>>* out);
  // The next `n` bytes copied to *out (resized to n).
  void Copy(size_t n, std::vector<uint8_t>* out);
  void Copy(size_t n, std::string* out);
  void Skip(size_t n);

  struct Field {
    uint32_t number = 0;
    uint32_t wire_type = 0;
    uint64_t value = 0;   // varint (fixed-width values are skipped: none is used)
    uint64_t length = 0;  // length-delimited: the bytes follow at the cursor
  };
  // Reads one field's key and, unless length-delimited, its value; `end` is
  // where the enclosing message ends.
  [[nodiscard]] Status ReadField(size_t end, Field* f);

  Status Malformed(const std::string& why, size_t at) const;

 private:
  [[nodiscard]] bool ReadByte(uint8_t* b);
  template <typename Out>
  void CopyTo(size_t n, Out* out);
  void Advance(size_t n);
  void SkipEmpty();

  const std::vector<grpc::Slice>& slices_;
  const char* what_;
  size_t slice_ = 0;
  size_t at_ = 0;
  size_t position_ = 0;
};

}  // namespace loco::wire

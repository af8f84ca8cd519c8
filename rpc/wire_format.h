// The few pieces of protobuf's wire format that the zero-copy paths handle by
// hand (server/pull_response_wire.h, client/push_chunks.h and
// client/placed_push_stream.h write it,
// client/pulled_response.h reads it): length-delimited fields around bytes
// that gRPC sends and receives where they lie.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace loco::wire {

// Wire types (the low 3 bits of a field's key).
inline constexpr uint32_t kVarint = 0;
inline constexpr uint32_t kFixed64 = 1;
inline constexpr uint32_t kLengthDelimited = 2;
inline constexpr uint32_t kFixed32 = 5;

// Appends `value` as a base-128 varint.
inline void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

inline size_t VarintSize(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

// Appends a varint field: its key and `value`.
inline void AppendVarintField(uint32_t field, uint64_t value, std::string* out) {
  AppendVarint((field << 3) | kVarint, out);
  AppendVarint(value, out);
}

// Appends a length-delimited field's key and length; its bytes follow.
inline void AppendKeyAndLength(uint32_t field, uint64_t length, std::string* out) {
  AppendVarint((field << 3) | kLengthDelimited, out);
  AppendVarint(length, out);
}

// The size of a length-delimited field of `length` bytes, key included.
inline size_t BytesFieldSize(uint32_t field, size_t length) {
  return VarintSize((field << 3) | kLengthDelimited) + VarintSize(length) + length;
}

}  // namespace loco::wire

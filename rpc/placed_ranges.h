// PlacedRanges: which bytes of a fixed-size buffer the pieces of a placed
// stream have filled (PushChunk and PullChunk put each piece at an offset,
// in any order). It refuses a piece that falls outside the buffer or
// overlaps one already placed, with a message naming both, and says when
// the buffer is covered. It keeps ranges, not bytes: adjacent ranges are
// merged, so a stream of small pieces keeps a small map.
//
// Not thread-safe: one per buffer of one stream.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"

namespace loco {

class PlacedRanges {
 public:
  // Records [offset, offset + bytes) of a buffer of `size` bytes. `where`
  // names the piece and `what` the buffer ("data", "scales") in the
  // message. InvalidArgument (and nothing recorded) when the range is
  // outside [0, size) or overlaps a recorded one. An empty piece records
  // nothing and is always accepted.
  [[nodiscard]] Status Add(const std::string& where, const char* what, uint64_t size,
                           uint64_t offset, uint64_t bytes);

  // Bytes recorded so far.
  uint64_t bytes() const { return bytes_; }
  void Clear() {
    ranges_.clear();
    bytes_ = 0;
  }

 private:
  std::map<uint64_t, uint64_t> ranges_;  // begin -> end, disjoint, not adjacent
  uint64_t bytes_ = 0;
};

}  // namespace loco

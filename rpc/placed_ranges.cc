#include "rpc/placed_ranges.h"

#include <iterator>

namespace loco {
namespace {

std::string Range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

}  // namespace

Status PlacedRanges::Add(const std::string& where, const char* what, uint64_t size,
                         uint64_t offset, uint64_t bytes) {
  if (bytes == 0) return Status::Ok();
  if (offset > size || bytes > size - offset) {
    return InvalidArgument(
        where + " puts " + std::to_string(bytes) + " " + what + " bytes at offset " +
        std::to_string(offset) + ", past the " + std::to_string(size) +
        " bytes the header's payload needs; every piece must lie in " + Range(0, size));
  }
  uint64_t begin = offset, end = offset + bytes;
  auto next = ranges_.upper_bound(begin);  // the first range starting after `begin`
  const auto overlap = [&](const auto& r) {
    return InvalidArgument(where + "'s " + what + " " + Range(begin, end) + " overlaps " + what +
                           " bytes " + Range(r->first, r->second) +
                           " already placed; the pieces must not overlap");
  };
  if (next != ranges_.end() && next->first < end) return overlap(next);
  if (next != ranges_.begin()) {
    const auto prev = std::prev(next);
    if (prev->second > begin) return overlap(prev);
  }
  bytes_ += bytes;
  if (next != ranges_.end() && next->first == end) {
    end = next->second;
    next = ranges_.erase(next);
  }
  if (next != ranges_.begin() && std::prev(next)->second == begin) {
    std::prev(next)->second = end;
  } else {
    ranges_.emplace_hint(next, begin, end);
  }
  return Status::Ok();
}

}  // namespace loco

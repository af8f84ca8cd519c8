#include "worker/group/local_group.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace loco {

LocalGroup::LocalGroup(std::vector<LocalSlice> slices, size_t num_elements,
                       std::chrono::milliseconds timeout)
    : slices_(std::move(slices)),
      num_elements_(num_elements),
      barrier_(static_cast<int>(slices_.size()), timeout) {}

Status LocalGroup::CheckCall(const char* what, int rank, size_t in, size_t in_expect, size_t out,
                             size_t out_expect) {
  Status bad = CheckCollectiveCall(what, rank, size(), in, in_expect, out, out_expect);
  if (!bad.ok()) {
    barrier_.Abort(Aborted("local group: another rank's call was invalid: " + bad.message()));
  }
  return bad;
}

Status ValidateSlices(std::span<const LocalSlice> slices, size_t num_elements) {
  if (slices.empty() || slices.size() > static_cast<size_t>(kMaxLocalDevices)) {
    return InvalidArgument("a local group needs between 1 and " +
                           std::to_string(kMaxLocalDevices) + " slices (one per local rank), got " +
                           std::to_string(slices.size()));
  }
  size_t expect = 0;
  for (size_t r = 0; r < slices.size(); ++r) {
    if (slices[r].offset != expect || slices[r].length > num_elements - expect) {
      return InvalidArgument("slice " + std::to_string(r) + " [" +
                             std::to_string(slices[r].offset) + ", +" +
                             std::to_string(slices[r].length) +
                             ") is not the next contiguous range starting at " +
                             std::to_string(expect) + " within " + std::to_string(num_elements) +
                             " elements");
    }
    expect += slices[r].length;
  }
  if (expect != num_elements) {
    return InvalidArgument("the slices cover " + std::to_string(expect) + " of " +
                           std::to_string(num_elements) + " elements; they must cover all");
  }
  return Status::Ok();
}

StatusOr<std::vector<LocalSlice>> SlicesForShards(std::span<const LocalSlice> shards, int n,
                                                  size_t align) {
  if (n < 1 || n > kMaxLocalDevices) {
    return InvalidArgument("local ranks = " + std::to_string(n) + ": expected an integer in [1, " +
                           std::to_string(kMaxLocalDevices) + "]");
  }
  if (align == 0) return InvalidArgument("SlicesForShards: align must be >= 1");
  size_t total = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    if (shards[s].offset != total || shards[s].length == 0) {
      return InvalidArgument("shard " + std::to_string(s) +
                             " is not the next contiguous, non-empty shard at " +
                             std::to_string(total));
    }
    total += shards[s].length;
  }
  if (shards.empty()) return InvalidArgument("SlicesForShards: the shard map is empty");
  const size_t ranks = static_cast<size_t>(n);
  std::vector<LocalSlice> out(ranks);
  if (shards.size() >= ranks) {
    // first[r]: index of rank r's first shard; strictly increasing, leaving
    // at least one shard for every later rank.
    std::vector<size_t> first(ranks + 1, 0);
    first[ranks] = shards.size();
    for (size_t r = 1; r < ranks; ++r) {
      const double target = static_cast<double>(total) * static_cast<double>(r) /
                            static_cast<double>(ranks);
      const size_t lo = first[r - 1] + 1, hi = shards.size() - (ranks - r);
      size_t best = lo;
      for (size_t j = lo; j <= hi; ++j) {
        const double d = std::abs(static_cast<double>(shards[j].offset) - target);
        if (d < std::abs(static_cast<double>(shards[best].offset) - target)) best = j;
      }
      first[r] = best;
    }
    for (size_t r = 0; r < ranks; ++r) {
      const size_t begin = shards[first[r]].offset;
      const size_t end = first[r + 1] < shards.size() ? shards[first[r + 1]].offset : total;
      out[r] = LocalSlice{begin, end - begin};
    }
  } else {
    const size_t units = (total + align - 1) / align;
    for (size_t r = 0; r < ranks; ++r) {
      const size_t begin = std::min(total, units * r / ranks * align);
      const size_t end = std::min(total, units * (r + 1) / ranks * align);
      out[r] = LocalSlice{begin, end - begin};
    }
  }
  LOCO_RETURN_IF_ERROR(ValidateSlices(out, total));
  return out;
}

Status CheckCollectiveCall(const char* what, int rank, int group_size, size_t in,
                           size_t in_expect, size_t out, size_t out_expect) {
  if (rank < 0 || rank >= group_size) {
    return InvalidArgument(std::string(what) + ": rank " + std::to_string(rank) +
                           " is not in [0, " + std::to_string(group_size) + ")");
  }
  if (in != in_expect || out != out_expect) {
    return InvalidArgument(std::string(what) + ": rank " + std::to_string(rank) + " passed " +
                           std::to_string(in) + " input and " + std::to_string(out) +
                           " output elements; expected " + std::to_string(in_expect) + " and " +
                           std::to_string(out_expect));
  }
  return Status::Ok();
}

}  // namespace loco

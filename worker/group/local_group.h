// LocalGroup: the devices (local ranks) of one node, which reduce their
// gradients at full precision among themselves so that only ONE payload per
// shard leaves the node (as in BytePS): the node is one member of the
// cluster (one worker id), whatever its number of devices.
//
// Two collectives, each called once per local rank, concurrently (one thread
// per rank; every rank of the group must make the same sequence of calls):
//   ReduceScatterMean: rank r receives slice r of the element-wise mean of
//     the ranks' full-size gradients;
//   AllGather: every rank receives the full vector whose slice q is what
//     rank q contributed.
// The slices are contiguous, cover the model, and are fixed when the group
// is built (SlicesForShards aligns them with the shard map, so that local
// rank r owns whole shards).
//
// Implementations: CpuLocalGroup (threads in one process;
// worker/group/local_group_cpu.h) and NcclLocalGroup (one process driving N
// CUDA devices through NCCL; worker/group/local_group_nccl.h, CUDA builds
// only). LocalGroupRunner (worker/group/local_group_runner.h) runs a node's
// training step over a group and one loco::Worker.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "worker/group/local_group_barrier.h"

namespace loco {

// The elements [offset, offset + length) of the flat parameter vector.
struct LocalSlice {
  size_t offset = 0;
  size_t length = 0;
};

// The base class holds what every implementation shares: the slices, the
// model size, the barrier the ranks meet at (and Abort breaks), and the
// argument check of a collective call. Implementations add the two
// collectives.
class LocalGroup {
 public:
  virtual ~LocalGroup() = default;
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;

  // Number of local ranks (devices), >= 1.
  int size() const { return static_cast<int>(slices_.size()); }
  // Elements of the full vector (the model size).
  size_t num_elements() const { return num_elements_; }
  // Rank r's slice; rank in [0, size()).
  LocalSlice slice(int rank) const { return slices_[static_cast<size_t>(rank)]; }

  // Called by every rank with its full-size gradient (num_elements()); writes
  // slice(rank) of the mean over the ranks into `out` (slice(rank).length
  // elements). `grads` must stay unchanged until the call returns. Fails with
  // DeadlineExceeded when a rank does not arrive within the group's timeout,
  // and with the abort status after Abort; the group is unusable afterwards.
  virtual Status ReduceScatterMean(int rank, std::span<const float> grads,
                                   std::span<float> out) = 0;

  // Called by every rank with its slice (slice(rank).length elements); writes
  // the full vector (num_elements()) into `full`. Same failure contract.
  virtual Status AllGather(int rank, std::span<const float> slice, std::span<float> full) = 0;

  // Breaks the group: the ranks waiting in a collective, and every later
  // call, fail with `why` instead of waiting for a rank that will not come
  // (e.g. its gradient computation failed). Thread-safe; the first reason
  // wins.
  void Abort(const Status& why) { barrier_.Abort(why); }

 protected:
  // `slices` valid (ValidateSlices) for `num_elements`; `timeout` bounds
  // every wait at the barrier (>= 1 ms). The implementations' Create
  // functions check both first.
  LocalGroup(std::vector<LocalSlice> slices, size_t num_elements,
             std::chrono::milliseconds timeout);

  // CheckCollectiveCall for this group; an invalid call also aborts the
  // group (the peers would otherwise wait for it until the timeout).
  Status CheckCall(const char* what, int rank, size_t in, size_t in_expect, size_t out,
                   size_t out_expect);

  const std::vector<LocalSlice> slices_;
  const size_t num_elements_;
  LocalGroupBarrier barrier_;
};

// Checks that `slices` (one per rank, n >= 1) are contiguous, in order, and
// cover [0, num_elements); empty slices are allowed.
Status ValidateSlices(std::span<const LocalSlice> slices, size_t num_elements);

// The argument check every LocalGroup implementation makes on a collective
// call: `rank` in [0, group_size), `in`/`out` element counts equal to the
// expected ones. `what` names the collective in the message.
[[nodiscard]] Status CheckCollectiveCall(const char* what, int rank, int group_size, size_t in,
                                         size_t in_expect, size_t out, size_t out_expect);

// Slices for `n` local ranks aligned with the shard map `shards` (contiguous,
// covering): with at least n shards, rank r owns a contiguous run of whole
// shards, the runs' boundaries being the shard boundaries nearest to
// r·total/n (each run holds at least one shard). With fewer shards than
// ranks, whole shards cannot be shared out; the model is then split evenly
// in units of `align` elements (some slices may be empty). n in [1, 64],
// align >= 1.
StatusOr<std::vector<LocalSlice>> SlicesForShards(std::span<const LocalSlice> shards, int n,
                                                  size_t align);

// The largest number of local ranks a group accepts (--local-devices).
inline constexpr int kMaxLocalDevices = 64;

}  // namespace loco

// NcclLocalGroup: a LocalGroup over N CUDA devices driven by ONE process
// (ncclCommInitAll), for nodes with several GPUs: the reduction runs at full
// precision over NVLink/PCIe and only the node's one payload per shard
// crosses the network. Built only when CUDA and NCCL are found
// (LOCO_HAVE_NCCL); Create fails with Unavailable without enough devices.
//
// The ranks call the collectives from their own threads, as with
// CpuLocalGroup (same contract, worker/group/local_group.h), with host buffers:
//   1. each rank copies its input into its device's send buffer on its own
//      stream (inputs are laid out in N chunks of max-slice length, padded
//      with zeros, because NCCL's collectives move equal counts per rank);
//   2. once all ranks staged (barrier), rank 0 issues the collective for
//      every device inside ncclGroupStart/ncclGroupEnd (one thread driving N
//      communicators must group them), on the devices' streams, so stream
//      order puts it after each device's copies;
//   3. after a second barrier each rank copies its result back and waits for
//      its own stream.
// ReduceScatterMean is ncclReduceScatter with ncclAvg; AllGather is
// ncclAllGather. The summation order is NCCL's (not CpuLocalGroup's fixed
// rank order), so results agree with the CPU group up to float rounding.
//
// Host staging keeps the interface shared with the CPU group; a CUDA model
// would hand device pointers instead and skip the copies.
//
// Thread safety: as CpuLocalGroup; each rank's calls from one thread.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "worker/group/local_group.h"

namespace loco {

class NcclLocalGroup final : public LocalGroup {
 public:
  // `devices`: one CUDA device ordinal per local rank (distinct, each <
  // the device count); `slices`: one per rank (ValidateSlices).
  static StatusOr<std::unique_ptr<NcclLocalGroup>> Create(std::vector<int> devices,
                                                          std::vector<LocalSlice> slices,
                                                          size_t num_elements,
                                                          std::chrono::milliseconds timeout);
  // Destroys the communicators, streams and device buffers.
  ~NcclLocalGroup() override;

  Status ReduceScatterMean(int rank, std::span<const float> grads, std::span<float> out) override;
  Status AllGather(int rank, std::span<const float> slice, std::span<float> full) override;

 private:
  // Per rank: its device, stream, communicator and device buffers. Opaque
  // here so that plain C++ callers need no CUDA headers.
  struct Rank;
  NcclLocalGroup(std::vector<LocalSlice> slices, size_t num_elements,
                 std::chrono::milliseconds timeout);
  Status Init(const std::vector<int>& devices);
  // Rank 0 between the barriers: issues `reduce` (true) or all-gather for
  // every device in one NCCL group; a failure aborts the group.
  Status IssueOnAllDevices(bool reduce);

  size_t chunk_ = 1;  // elements per rank in the NCCL buffers: the largest slice
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace loco

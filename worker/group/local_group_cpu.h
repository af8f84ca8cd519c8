// CpuLocalGroup: a LocalGroup whose local ranks are threads of one process
// (one thread per rank, e.g. one per device the process drives).
//
// Why threads in one process rather than one process per device: the ranks
// share the address space, so a collective reads the other ranks' buffers
// in place (no copies through shared memory or sockets, no IPC setup or
// cleanup after a crash); the node stays ONE member of the cluster with one
// loco::Worker, one LoCo error state per shard and one set of connections,
// which several processes could only have by electing a leader and
// forwarding to it; and it is the layout NCCL's ncclCommInitAll expects (one
// process, N devices), so the CPU and NCCL groups are driven the same way.
// The price: a crash of one rank takes the whole node down, which is what
// the cluster sees anyway, since the node is one member.
//
// Determinism: ReduceScatterMean sums in a fixed order, in float:
//   out[i] = (((g_0[i] + g_1[i]) + g_2[i]) + ... + g_{N-1}[i]) / N
// (rank 0 first, one float rounding per addition, then one float division),
// whatever the threads' timing, so that runs repeat bit for bit. Each rank
// computes its own slice, reading every rank's gradient in place.
//
// Thread safety: every method may be called from the ranks' threads
// concurrently; a given rank's calls come from one thread at a time, in the
// same sequence on every rank.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "worker/group/local_group.h"

namespace loco {

class CpuLocalGroup final : public LocalGroup {
 public:
  // `slices`: one per rank (ValidateSlices); `num_elements` the model size;
  // `timeout` bounds every wait for the other ranks (>= 1 ms).
  static StatusOr<std::unique_ptr<CpuLocalGroup>> Create(std::vector<LocalSlice> slices,
                                                         size_t num_elements,
                                                         std::chrono::milliseconds timeout);

  Status ReduceScatterMean(int rank, std::span<const float> grads, std::span<float> out) override;
  Status AllGather(int rank, std::span<const float> slice, std::span<float> full) override;

 private:
  CpuLocalGroup(std::vector<LocalSlice> slices, size_t num_elements,
                std::chrono::milliseconds timeout);

  // Rank r's published input of the collective in progress: written by rank
  // r before the first barrier, read by the others between the two barriers.
  std::vector<const float*> inputs_;
};

}  // namespace loco

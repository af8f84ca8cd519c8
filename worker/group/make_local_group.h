// MakeLocalGroup: the LocalGroup (worker/group/local_group.h) a node's training
// loop runs on, by kind, so that callers need neither implementation's
// header nor to know whether this build has NCCL.
//   cpu:  CpuLocalGroup, threads in this process, host memory;
//   nccl: NcclLocalGroup over CUDA devices 0..n-1 (n = slices.size()),
//         in builds with NCCL (HaveNcclLocalGroup()).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "common/status.h"
#include "worker/group/local_group.h"

namespace loco {

enum class LocalGroupKind { kCpu, kNccl };

// True when this build compiled NcclLocalGroup (CUDA and NCCL were found).
bool HaveNcclLocalGroup();

// `slices`: one per local rank (ValidateSlices); `timeout` bounds every wait
// for a rank. kNccl in a build without NCCL: Unimplemented; without enough
// devices: Unavailable.
StatusOr<std::unique_ptr<LocalGroup>> MakeLocalGroup(LocalGroupKind kind,
                                                     std::vector<LocalSlice> slices,
                                                     size_t num_elements,
                                                     std::chrono::milliseconds timeout);

}  // namespace loco

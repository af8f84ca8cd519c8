#include "worker/group/make_local_group.h"

#include <numeric>
#include <utility>

#include "worker/group/local_group_cpu.h"
#if LOCO_HAVE_NCCL
#include "worker/group/local_group_nccl.h"
#endif

namespace loco {

bool HaveNcclLocalGroup() {
#if LOCO_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

StatusOr<std::unique_ptr<LocalGroup>> MakeLocalGroup(LocalGroupKind kind,
                                                     std::vector<LocalSlice> slices,
                                                     size_t num_elements,
                                                     std::chrono::milliseconds timeout) {
  if (kind == LocalGroupKind::kCpu) {
    auto made = CpuLocalGroup::Create(std::move(slices), num_elements, timeout);
    if (!made.ok()) return made.status();
    return std::unique_ptr<LocalGroup>(std::move(made).value());
  }
#if LOCO_HAVE_NCCL
  std::vector<int> devices(slices.size());
  std::iota(devices.begin(), devices.end(), 0);
  auto made = NcclLocalGroup::Create(std::move(devices), std::move(slices), num_elements, timeout);
  if (!made.ok()) return made.status();
  return std::unique_ptr<LocalGroup>(std::move(made).value());
#else
  return Unimplemented("this build has no NCCL: the NCCL local group needs CUDA and NCCL at "
                       "build time; use the CPU group");
#endif
}

}  // namespace loco

#include "worker/group/local_group_cpu.h"

#include <algorithm>
#include <string>
#include <utility>

namespace loco {

StatusOr<std::unique_ptr<CpuLocalGroup>> CpuLocalGroup::Create(
    std::vector<LocalSlice> slices, size_t num_elements, std::chrono::milliseconds timeout) {
  LOCO_RETURN_IF_ERROR(ValidateSlices(slices, num_elements).Annotate("CpuLocalGroup"));
  if (timeout.count() < 1) {
    return InvalidArgument("CpuLocalGroup: timeout = " + std::to_string(timeout.count()) +
                           " ms; expected at least 1 ms");
  }
  return std::unique_ptr<CpuLocalGroup>(
      new CpuLocalGroup(std::move(slices), num_elements, timeout));
}

CpuLocalGroup::CpuLocalGroup(std::vector<LocalSlice> slices, size_t num_elements,
                             std::chrono::milliseconds timeout)
    : LocalGroup(std::move(slices), num_elements, timeout), inputs_(slices_.size(), nullptr) {}

Status CpuLocalGroup::ReduceScatterMean(int rank, std::span<const float> grads,
                                        std::span<float> out) {
  const size_t expect_out = rank >= 0 && rank < size() ? slice(rank).length : 0;
  LOCO_RETURN_IF_ERROR(CheckCall("ReduceScatterMean", rank, grads.size(), num_elements_,
                                 out.size(), expect_out));
  const size_t r = static_cast<size_t>(rank);
  inputs_[r] = grads.data();
  // Every rank has published its gradient.
  LOCO_RETURN_IF_ERROR(barrier_.Arrive("ReduceScatterMean"));
  const LocalSlice s = slices_[r];
  const float n = static_cast<float>(size());
  for (size_t i = 0; i < s.length; ++i) {
    float sum = inputs_[0][s.offset + i];
    for (size_t q = 1; q < inputs_.size(); ++q) sum += inputs_[q][s.offset + i];
    out[i] = sum / n;
  }
  // Nobody returns (and reuses its gradient or input slot) while a peer
  // still reads it.
  return barrier_.Arrive("ReduceScatterMean (done)");
}

Status CpuLocalGroup::AllGather(int rank, std::span<const float> slice_in,
                                std::span<float> full) {
  const size_t expect_in = rank >= 0 && rank < size() ? slice(rank).length : 0;
  LOCO_RETURN_IF_ERROR(
      CheckCall("AllGather", rank, slice_in.size(), expect_in, full.size(), num_elements_));
  inputs_[static_cast<size_t>(rank)] = slice_in.data();
  LOCO_RETURN_IF_ERROR(barrier_.Arrive("AllGather"));
  for (size_t q = 0; q < slices_.size(); ++q) {
    const LocalSlice s = slices_[q];
    // Skips the copy onto itself when a rank's slice already lies in place.
    if (inputs_[q] != full.data() + s.offset) {
      std::copy_n(inputs_[q], s.length, full.data() + s.offset);
    }
  }
  return barrier_.Arrive("AllGather (done)");
}

}  // namespace loco

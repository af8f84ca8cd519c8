#include "client/step_hyper.h"

#include <algorithm>
#include <string>

#include "proto/loco.pb.h"
#include "rpc/step_hyper.h"

namespace loco {
namespace {

void CopyValues(const HyperGroup& from, v1::HyperGroup* to) {
  to->set_lr(from.lr);
  to->set_beta1(from.beta1);
  to->set_beta2(from.beta2);
  to->set_eps(from.eps);
  to->set_weight_decay(from.weight_decay);
  to->set_update(from.add_mean ? v1::HYPER_UPDATE_ADD_MEAN : v1::HYPER_UPDATE_ADAMW);
}

}  // namespace

Status ValidateHyperGroups(std::span<const HyperGroup> groups, uint64_t total_elements) {
  uint64_t next = 0;  // where the next group must begin
  for (size_t i = 0; i < groups.size(); ++i) {
    const HyperGroup& group = groups[i];
    v1::HyperGroup wire;
    wire.set_begin(group.begin);
    wire.set_end(group.end);
    CopyValues(group, &wire);
    const std::string name = HyperGroupName(static_cast<int>(i), wire);
    if (group.begin >= group.end) {
      return InvalidArgument(name + " is empty or reversed: begin must be below end");
    }
    if (group.begin != next) {
      return InvalidArgument(name + " should begin at " + std::to_string(next) +
                             ": the groups must cover the model's [0, " +
                             std::to_string(total_elements) +
                             ") in order, without gaps or overlaps");
    }
    if (group.end > total_elements) {
      return InvalidArgument(name + " passes the model's end " + std::to_string(total_elements));
    }
    auto params = HyperGroupParams(wire);
    if (!params.ok()) return params.status().Annotate(name);
    next = group.end;
  }
  if (next != total_elements) {
    return InvalidArgument("the hyper groups cover [0, " + std::to_string(next) +
                           ") of the model's [0, " + std::to_string(total_elements) +
                           "); every element needs a group");
  }
  return Status::Ok();
}

size_t MaxHyperGroupsPerPush() { return kMaxHyperGroups; }

Status FillShardHyper(std::span<const HyperGroup> groups, uint64_t offset, uint64_t length,
                      v1::StepHyper* out) {
  out->Clear();
  const uint64_t end = offset + length;
  // In order: the first group that ends after the shard's first element.
  auto it = std::upper_bound(groups.begin(), groups.end(), offset,
                             [](uint64_t i, const HyperGroup& g) { return i < g.end; });
  for (; it != groups.end() && it->begin < end; ++it) {
    if (static_cast<size_t>(out->groups_size()) == kMaxHyperGroups) {
      out->Clear();
      return InvalidArgument("the shard [" + std::to_string(offset) + ", " + std::to_string(end) +
                             ") meets more than " + std::to_string(kMaxHyperGroups) +
                             " hyper groups, more than one push may "
                             "carry; merge neighbouring groups with the same values");
    }
    v1::HyperGroup* group = out->add_groups();
    group->set_begin(std::max(it->begin, offset));
    group->set_end(std::min(it->end, end));
    CopyValues(*it, group);
  }
  return Status::Ok();
}

}  // namespace loco

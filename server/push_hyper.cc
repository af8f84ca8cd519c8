#include "server/push_hyper.h"

#include <algorithm>
#include <string>
#include <vector>

#include "rpc/step_hyper.h"

namespace loco {
namespace {

Status Uncovered(uint64_t begin, uint64_t end, ShardRange range) {
  return InvalidArgument("the step's hyper-parameters leave [" + std::to_string(begin) + ", " +
                         std::to_string(end) + ") of this shard's range [" +
                         std::to_string(range.offset) + ", " +
                         std::to_string(range.offset + range.length) +
                         ") in no group; the groups must cover every element of the shard");
}

}  // namespace

StatusOr<HyperGroups> PushHyper(const v1::PushRequest& push, ShardRange range,
                                const AdamWParams& flags) {
  if (!push.has_hyper()) return HyperGroups::Uniform(range.length, flags);
  const v1::StepHyper& hyper = push.hyper();
  LOCO_RETURN_IF_ERROR(ValidateStepHyper(hyper));
  const uint64_t shard_begin = range.offset, shard_end = range.offset + range.length;
  std::vector<HyperSpan> spans;
  uint64_t covered = shard_begin;  // every element below it is in a group
  for (int i = 0; i < hyper.groups_size() && covered < shard_end; ++i) {
    const v1::HyperGroup& group = hyper.groups(i);
    if (group.end() <= covered) continue;  // before the shard (or what is covered)
    if (group.begin() >= shard_end) break;  // sorted: the rest lie after the shard
    if (group.begin() > covered) return Uncovered(covered, group.begin(), range);
    HyperSpan span;
    span.begin = covered - shard_begin;
    span.end = std::min<uint64_t>(group.end(), shard_end) - shard_begin;
    span.params = HyperGroupParams(group).value();  // checked by ValidateStepHyper
    span.add_mean = group.update() == v1::HYPER_UPDATE_ADD_MEAN;
    span.group = i;
    spans.push_back(span);
    covered = span.end + shard_begin;
  }
  if (covered < shard_end) return Uncovered(covered, shard_end, range);
  return HyperGroups(std::move(spans), flags.max_grad_norm);
}

}  // namespace loco

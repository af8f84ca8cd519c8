// HyperGroup: a step's AdamW hyper-parameters as a trainer holds them (a
// torch optimizer's param groups, each flattened to stretches of the flat
// parameter space), and what one shard's push carries of them
// (PushRequest.hyper, proto/loco.proto).
//
// A worker that has hyper-parameters for a step validates them once
// (ValidateHyperGroups) and fills each shard's push with FillShardHyper;
// every worker of a step must send the same values, or the shards refuse
// the later pushes. A push without them steps with the servers' flags.
//
// gRPC-free: v1::StepHyper is only declared here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"

namespace loco {
namespace v1 {
class StepHyper;
}  // namespace v1

// AdamW's hyper-parameters over elements [begin, end) of the flat
// parameter space (global indices). The defaults are torch.optim.AdamW's
// but for weight decay (0; torch's is 0.01).
//
// add_mean: the elements are not optimised but kept equal on every worker
// (HYPER_UPDATE_ADD_MEAN, proto/loco.proto): the servers add the step's
// mean push to them, so a worker that pushes its value minus the copy it
// holds receives the mean of the workers' values (normalisation
// statistics). The AdamW values are then ignored but must still be valid.
struct HyperGroup {
  uint64_t begin = 0;
  uint64_t end = 0;
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool add_mean = false;
};

// OK when `groups` cover [0, total_elements) exactly, in order (each
// begin < end, each begin the previous end), and every group's values are
// valid in fp32 (lr finite >= 0, betas in [0, 1), eps finite > 0,
// weight_decay finite >= 0, lr * weight_decay <= 1; rpc/step_hyper.h).
// Otherwise InvalidArgument naming the group ("hyper group 2 [10, 20): ...").
[[nodiscard]] Status ValidateHyperGroups(std::span<const HyperGroup> groups,
                                         uint64_t total_elements);

// The most groups one push may carry (kMaxHyperGroups, rpc/step_hyper.h),
// for callers outside rpc/'s reach (the Python package). FillShardHyper
// refuses a shard that meets more; groups that number at most this are
// never refused, whatever shard map the cluster has now or after a rejoin.
size_t MaxHyperGroupsPerPush();

// Replaces `*out` with the groups that intersect the shard
// [offset, offset + length), clipped to it, in order, with their values
// unchanged. Precondition: ValidateHyperGroups(groups, total) succeeded
// for a total that holds the shard. InvalidArgument when the shard meets
// more groups than one push may carry (kMaxHyperGroups, rpc/step_hyper.h).
[[nodiscard]] Status FillShardHyper(std::span<const HyperGroup> groups, uint64_t offset,
                                    uint64_t length, v1::StepHyper* out);

}  // namespace loco

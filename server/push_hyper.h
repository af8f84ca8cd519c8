// PushHyper: the hyper-parameters a push asks its shard to step with
// (proto/loco.proto, PushRequest.hyper), checked and clipped to the shard.
#pragma once

#include "common/shard_layout.h"
#include "common/status.h"
#include "kernels/adamw.h"
#include "proto/loco.pb.h"
#include "server/hyper_groups.h"

namespace loco {

// A push without hyper-parameters: the server's `flags` over the whole
// shard. A push with them: the message is checked as a whole
// (ValidateStepHyper: count, order, overlaps, every group's values), then
// the groups that intersect `range` are clipped to it and must cover it
// without a gap; the spans are shard-local, and clipping uses
// flags.max_grad_norm. InvalidArgument naming the group and the field, or
// the first element of the shard that no group covers. Touches no state.
[[nodiscard]] StatusOr<HyperGroups> PushHyper(const v1::PushRequest& push, ShardRange range,
                                              const AdamWParams& flags);

}  // namespace loco

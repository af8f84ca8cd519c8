// The checks of a step's hyper-parameters on the wire (v1::StepHyper,
// proto/loco.proto) that do not depend on a shard: how many groups, their
// order and extent, and each group's values. Both sides run them: a server
// on every push that carries hyper-parameters (server/push_hyper.h, which
// then clips the groups to its shard and checks that they cover it), a
// worker on what it is about to send (client/step_hyper.h).
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"
#include "kernels/adamw.h"
#include "proto/loco.pb.h"

namespace loco {

// The most groups one StepHyper may carry. A torch model's param groups
// become one group per run of consecutive tensors with the same settings
// (weights decayed, biases and norms not): a few hundred for large models.
constexpr size_t kMaxHyperGroups = 4096;

// The group's values as the kernels apply them (fp32; max_grad_norm 0).
// InvalidArgument naming the field and value when one is outside fp32's
// range or the result fails ValidateAdamWParams (a beta that rounds to 1 in
// fp32 included).
[[nodiscard]] StatusOr<AdamWParams> HyperGroupParams(const v1::HyperGroup& group);

// OK when `hyper` has at most kMaxHyperGroups groups, each with begin < end,
// sorted by begin without overlaps, and each group's values are valid
// (HyperGroupParams). Otherwise InvalidArgument naming the first bad group
// by index and range, e.g. "hyper group 2 [4096, 8192): lr nan is not a
// finite value >= 0".
[[nodiscard]] Status ValidateStepHyper(const v1::StepHyper& hyper);

// "hyper group <index> [begin, end)", as the messages above name a group.
std::string HyperGroupName(int index, const v1::HyperGroup& group);

// The shortest decimal text that reads back as exactly `value` (std::to_chars).
std::string ShortestFloat(float value);
std::string ShortestDouble(double value);

}  // namespace loco

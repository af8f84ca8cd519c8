#include "common/adamw_limits.h"

#include <string>

#include "common/format_double.h"

namespace loco {

Status CheckLrTimesWeightDecay(const FlagSet& flags, double lr, double weight_decay) {
  const float lr_float = static_cast<float>(lr);
  const float decay_float = static_cast<float>(weight_decay);
  if (lr_float * decay_float <= 1.0f) return Status::Ok();
  return InvalidArgument(
      flags.Named("lr") + " " + FormatDouble(lr) + " times " + flags.Named("weight-decay") + " " +
      FormatDouble(weight_decay) + " is " + FormatDouble(lr * weight_decay) +
      ", above 1: AdamW multiplies every parameter by 1 - lr * weight decay each step, which "
      "would flip their sign; expected a product of at most 1 (a smaller --lr or "
      "--weight-decay)");
}

}  // namespace loco

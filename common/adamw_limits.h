// The range of AdamW's learning rate that the binaries accept, in one place:
// loco-server's --lr and loco-launch's --lr (which it hands to every server)
// must agree, or a launch would start a cluster whose servers refuse it.
//
// The servers compute with the rate as a 32-bit float, so the range is
// checked on the value rounded to one (FlagSet::AddFloat): 1e-300 would
// pass a check in double and reach AdamW as 0.
//
// Zero is refused: the flag is the rate of every step whose pushes carry no
// hyper-parameters of their own (loco-worker's), and with a rate of 0 AdamW
// moves no parameter, weight decay included, so such a run would report
// steps and train nothing. A schedule that starts at 0 (a warm-up) sends its
// rate with each push (PushRequest.hyper), where 0 stays allowed.
//
// Ten is already far beyond any useful AdamW step (each step moves a
// parameter by about lr); a larger value is a typo, so it is refused.
//
// The learning rate and the weight decay are limited together too: AdamW
// multiplies every parameter by 1 - lr * weight_decay each step, so a
// product above 1 would flip the parameters' sign (kernels/adamw.h refuses
// it). CheckLrTimesWeightDecay refuses it as the flags give it.
#pragma once

#include "common/flags.h"
#include "common/status.h"

namespace loco {

inline constexpr FloatRange kLearningRateRange{.min = 0, .max = 10, .min_excluded = true};

// InvalidArgument naming --lr and --weight-decay (as `flags` parsed them:
// FlagSet::Named), their values and their product when the product, in the
// 32-bit floats the shard computes with (as ValidateAdamWParams does),
// exceeds 1; OK otherwise.
[[nodiscard]] Status CheckLrTimesWeightDecay(const FlagSet& flags, double lr, double weight_decay);

}  // namespace loco

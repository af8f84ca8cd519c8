// The range of AdamW's learning rate that the binaries accept, in one place:
// loco-server's --lr and loco-launch's --lr (which it hands to every server)
// must agree, or a launch would start a cluster whose servers refuse it.
//
// Ten is already far beyond any useful AdamW step (each step moves a
// parameter by about lr); a larger value is a typo, so it is refused.
#pragma once

namespace loco {

inline constexpr double kMinLearningRate = 0;
inline constexpr double kMaxLearningRate = 10;

}  // namespace loco

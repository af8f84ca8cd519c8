// GradientReady: how a gradient computation reports progress, so that the
// worker can compress and push the parts of the gradient that are final
// while the rest is still being computed (a backward pass finishes the last
// layers first).
//
// Contract: called on the computing thread with `ready_from` such that the
// gradient's elements [ready_from, n) are final (never written again during
// this computation); successive calls never raise ready_from. A computation
// may call it any number of times, or never: its return means that the whole
// gradient is final.
#pragma once

#include <cstddef>
#include <functional>

namespace loco {

using GradientReady = std::function<void(size_t ready_from)>;

}  // namespace loco

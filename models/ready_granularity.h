// ReadyGranularity: when Mlp::LossAndGradient tells its listener
// (common/gradient_ready.h) that a part of the gradient is final. Either
// way the gradient is the same, bit for bit; only the calls move.
#pragma once

namespace loco {

enum class ReadyGranularity {
  // After each panel of rows of a weight gradient, before the layer's input
  // gradient δ·W is computed: the earliest the parts are final.
  kPanel,
  // Once per layer, at the layer's weight offset, after its weight gradient
  // (every panel) and its input gradient δ·W are computed: as torch's
  // autograd reports a parameter (AccumulateGrad runs after the Linear
  // node's backward has computed both), for a like-for-like comparison
  // with the Python layer. The bias needs no call of its own: it follows
  // the weights in the flat layout, so the layer's call covers it.
  kTensor,
};

}  // namespace loco

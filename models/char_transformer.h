// CharTransformer: a small GPT-style character (byte) language model, the
// second built-in model of loco-worker. Pre-LayerNorm blocks of causal
// multi-head self-attention and a GELU MLP (4× width), learned position
// embeddings, a final LayerNorm and an output head tied to the token
// embedding. Loss: next-token cross-entropy, averaged over every position of
// the batch. Forward and backward follow llm.c's CPU reference, with the
// matrix products on OpenBLAS (cblas_sgemm).
//
// Parameters live OUTSIDE the model, in one flat fp32 vector (DESIGN §3), as
// the ordered tensors named by tensors(): wte [V×C], wpe [T×C], then per
// layer l: l.ln1.w, l.ln1.b [C], l.qkv.w [3C×C], l.qkv.b [3C], l.proj.w
// [C×C], l.proj.b [C], l.ln2.w, l.ln2.b [C], l.fc.w [4C×C], l.fc.b [4C],
// l.fcproj.w [C×4C], l.fcproj.b [C]; then lnf.w, lnf.b [C]. Weights are
// [out × in] row-major, like Mlp.
//
// A batch is n sequences of context+1 tokens each, packed: tokens [0, T) of a
// sequence are the inputs and tokens [1, T] the targets.
//
// Not thread-safe: the model keeps scratch activations of the last batch; use
// one per thread. OpenBLAS's thread count is process state, set by the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "models/eval_result.h"
#include "models/tensor_info.h"

namespace loco {

struct CharTransformerConfig {
  size_t vocab = 256;    // V: tokens are bytes < vocab
  size_t context = 64;   // T: positions per sequence
  size_t layers = 2;     // L
  size_t channels = 128; // C: a multiple of heads
  size_t heads = 4;      // NH
};

class CharTransformer {
 public:
  // Every size >= 1, vocab <= 256, channels % heads == 0, sizes bounded so
  // that the parameter count fits comfortably in memory.
  static StatusOr<CharTransformer> Create(const CharTransformerConfig& config);

  const CharTransformerConfig& config() const { return cfg_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  size_t num_parameters() const { return num_params_; }
  // Tokens per packed sequence (context + 1).
  size_t sequence_length() const { return cfg_.context + 1; }

  // GPT-2's init, deterministic for `seed`: weights N(0, 0.02²), the two
  // projections into the residual stream N(0, (0.02/sqrt(2L))²), biases 0,
  // LayerNorm gains 1.
  std::vector<float> InitialParameters(uint64_t seed) const;

  // Mean next-token cross-entropy over the n·T positions of `sequences`
  // (n·(T+1) tokens); writes d(loss)/d(params) into grads (resized).
  StatusOr<double> LossAndGradient(std::span<const float> params,
                                   std::span<const uint8_t> sequences, std::vector<float>* grads);

  // Mean cross-entropy and next-token top-1 accuracy over all positions, in
  // chunks of `chunk` sequences.
  StatusOr<EvalResult> Evaluate(std::span<const float> params, std::span<const uint8_t> sequences,
                                size_t chunk = 32);

 private:
  explicit CharTransformer(const CharTransformerConfig& config);
  Status CheckBatch(std::span<const float> params, std::span<const uint8_t> sequences) const;
  // Offsets of layer l's tensors in the flat vector.
  struct LayerOffsets {
    size_t ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
  };
  // Runs the model on n sequences; leaves the softmax probabilities in
  // probs_ and returns Σ −log p(target) over the n·T positions (and counts
  // correct argmax predictions into *correct when non-null).
  double Forward(const float* params, const uint8_t* seqs, size_t n, size_t* correct);
  void Backward(const float* params, const uint8_t* seqs, size_t n, float* grads);

  CharTransformerConfig cfg_;
  std::vector<TensorInfo> tensors_;
  std::vector<LayerOffsets> layer_;
  size_t wte_ = 0, wpe_ = 0, lnfw_ = 0, lnfb_ = 0, num_params_ = 0;

  // Activations of the last Forward, sized for its n (BT = n·T rows).
  struct LayerActs {
    std::vector<float> ln1, ln1_mean, ln1_rstd, qkv, att, atty, res2;
    std::vector<float> ln2, ln2_mean, ln2_rstd, fch, fch_gelu, res3;
  };
  std::vector<float> encoded_;  // embeddings, the input of layer 0
  std::vector<LayerActs> acts_;
  std::vector<float> lnf_, lnf_mean_, lnf_rstd_, probs_;
  // Backward scratch.
  std::vector<float> dres_, dln_, dqkv_, datty_, dfch_, dlogits_, dpre_;
};

}  // namespace loco

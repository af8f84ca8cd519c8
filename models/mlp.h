// Mlp: a multilayer-perceptron classifier (Linear → ReLU → … → Linear), the
// built-in model of loco-worker. Loss: softmax cross-entropy, averaged over
// the batch.
//
// Parameters live OUTSIDE the Mlp, in one flat fp32 vector (the flat
// parameter space of DESIGN §3), as the ordered tensors w0, b0, w1, b1, …;
// w_k is [out_k × in_k] row-major (PyTorch's nn.Linear layout), b_k is
// [out_k]. tensors() names each tensor's offset and size.
//
// Matrix products use OpenBLAS (cblas_sgemm), except a large layer's for a
// batch of a few rows on one BLAS thread, which use SmallBatchGemm
// (models/small_batch_gemm.h: OpenBLAS's copies of the weights cost as
// much as its arithmetic there). Which one depends on the shapes and the
// thread count only, never on who listens to the gradient. OpenBLAS's
// thread count is process state: set it once at startup (loco-worker's
// --blas-threads), not here.
//
// Not thread-safe: an Mlp keeps scratch activations for the last batch; use
// one per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/gradient_ready.h"
#include "common/status.h"
#include "models/eval_result.h"
#include "models/ready_granularity.h"
#include "models/small_batch_gemm.h"
#include "models/tensor_info.h"

namespace loco {

class Mlp {
 public:
  // layer_sizes = {inputs, hidden..., classes}; at least 2 entries, all >= 1.
  static StatusOr<Mlp> Create(std::vector<size_t> layer_sizes);

  // Whether a large layer's products for a small batch may use
  // SmallBatchGemm (default true); false keeps every product on
  // OpenBLAS.
  void set_small_batch_gemm(bool allowed) { small_batch_allowed_ = allowed; }
  // When `ready` is told (default kPanel). Changes nothing in the gradient.
  void set_ready_granularity(ReadyGranularity g) { ready_granularity_ = g; }

  const std::vector<size_t>& layer_sizes() const { return sizes_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  size_t num_parameters() const { return num_params_; }
  size_t num_inputs() const { return sizes_.front(); }
  size_t num_classes() const { return sizes_.back(); }

  // PyTorch's default nn.Linear init, deterministic for `seed`: every weight
  // and bias of layer k is U(−1/sqrt(in_k), 1/sqrt(in_k)).
  std::vector<float> InitialParameters(uint64_t seed) const;

  // Mean cross-entropy of `batch` samples (images: batch × inputs row-major,
  // labels in [0, classes)); writes d(loss)/d(params) into grads (resized to
  // num_parameters()).
  // Each layer's weight gradient is computed in panels of rows from the
  // last row up; `ready` (optional; see common/gradient_ready.h) is told
  // after each panel that the gradient from the panel's first row to the
  // end is final (kPanel), or once per layer after its input gradient
  // (kTensor): the last layers first. The gradient is the same, bit for
  // bit, with or without `ready` and at either granularity.
  StatusOr<double> LossAndGradient(std::span<const float> params, std::span<const float> images,
                                   std::span<const uint8_t> labels, std::vector<float>* grads,
                                   const GradientReady& ready = {});

  // Accuracy and mean loss over all samples, in chunks of `chunk` samples.
  StatusOr<EvalResult> Evaluate(std::span<const float> params, std::span<const float> images,
                                std::span<const uint8_t> labels, size_t chunk = 1000);

 private:
  // Panels of a weight gradient: at least this many elements each (fewer,
  // larger products), at most this many per layer.
  static constexpr size_t kMinPanelElements = size_t{1} << 17;
  static constexpr size_t kMaxPanels = 8;

  explicit Mlp(std::vector<size_t> sizes);
  // Whether the products of an n-row batch through an o × i layer use
  // small_batch_ rather than OpenBLAS.
  bool UseSmallBatchGemm(size_t n, size_t o, size_t i) const;
  Status CheckBatch(std::span<const float> params, std::span<const float> images,
                    std::span<const uint8_t> labels) const;
  // Fills acts_[k] (post-ReLU activations; acts_.back() = logits) for `n` rows.
  void Forward(const float* params, const float* images, size_t n);
  // Softmax of the logits in place (rows of acts_.back()); returns Σ −log p_label.
  double SoftmaxLoss(const uint8_t* labels, size_t n);
  // Layer k's (k >= 1) input gradient: delta_ becomes (δ · W_k) ⊙ ReLU'
  // of acts_[k - 1], the delta of layer k - 1, for `n` rows.
  void BackpropagateDelta(size_t k, size_t n, const float* w, bool small);

  std::vector<size_t> sizes_;
  std::vector<TensorInfo> tensors_;  // w0, b0, w1, b1, ...
  size_t num_params_ = 0;
  std::vector<std::vector<float>> acts_;  // acts_[k]: output of layer k, n × sizes_[k+1]
  std::vector<float> delta_, delta_prev_;
  SmallBatchGemm small_batch_;  // scratch for the small-batch products
  bool small_batch_allowed_ = true;
  ReadyGranularity ready_granularity_ = ReadyGranularity::kPanel;
};

}  // namespace loco

// CudaMlp: the Mlp of models/mlp.h on one CUDA device. Same layers, flat
// parameter layout (w0, b0, w1, b1, ...; w_k row-major [out × in]), loss
// (mean softmax cross-entropy) and gradient; cuBLAS does the matrix
// products, small kernels the bias, ReLU, softmax and bias gradients.
// Parameters and gradients stay in device memory; only the batch (through
// pinned buffers) and one loss per sample cross the bus.
//
// The CPU Mlp is the reference: tests/models/mlp_cuda_test.cc checks the
// gradient against it at a relative tolerance of 1e-4 (the products are
// summed in another order, so bit equality is not expected).
//
// Builds without CUDA compile a stub whose Create returns Unimplemented;
// Create returns Unavailable when no device can be used.
//
// Not thread-safe: one CudaMlp per thread. All work runs on the CudaMlp's
// own stream; every call returns after that stream has finished it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/gradient_ready.h"
#include "common/status.h"
#include "models/eval_result.h"

namespace loco {

class CudaMlp {
 public:
  // layer_sizes as for Mlp::Create; `device` a CUDA ordinal; batches of up
  // to max_batch samples (>= 1) are accepted.
  static StatusOr<std::unique_ptr<CudaMlp>> Create(std::vector<size_t> layer_sizes, int device,
                                                   size_t max_batch);
  ~CudaMlp();
  CudaMlp(const CudaMlp&) = delete;
  CudaMlp& operator=(const CudaMlp&) = delete;

  size_t num_parameters() const;
  const std::vector<size_t>& layer_sizes() const;

  // Device-resident step: d_params and d_grads are device arrays of
  // num_parameters() floats (d_grads is overwritten). images/labels are
  // host arrays of one batch of n <= max_batch samples. Returns the mean
  // cross-entropy. InvalidArgument for a bad batch (nothing computed).
  // `ready` (optional) is told, last layer first, when d_grads from a
  // layer's weights on is final on the device (common/gradient_ready.h):
  // another stream may read that suffix while earlier layers compute.
  StatusOr<double> LossAndGradientOnDevice(const float* d_params, std::span<const float> images,
                                           std::span<const uint8_t> labels, float* d_grads,
                                           const GradientReady& ready = {});

  // Host-facing form for the training loop: params are copied to the
  // device through a pinned buffer, the gradient back into *grads
  // (resized to num_parameters()).
  StatusOr<double> LossAndGradient(std::span<const float> params, std::span<const float> images,
                                   std::span<const uint8_t> labels, std::vector<float>* grads);

  // As LossAndGradient, but the gradient stays in device memory, at
  // device_gradients() (valid until the next call on this CudaMlp). An empty
  // batch gives a zero gradient and loss 0.
  StatusOr<double> LossAndGradientKeptOnDevice(std::span<const float> params,
                                               std::span<const float> images,
                                               std::span<const uint8_t> labels,
                                               const GradientReady& ready = {});
  // The device array of num_parameters() gradient values.
  std::span<const float> device_gradients() const;

  // Accuracy and mean loss over all samples, max_batch at a time.
  StatusOr<EvalResult> Evaluate(std::span<const float> params, std::span<const float> images,
                                std::span<const uint8_t> labels);

 private:
  struct Impl;
  explicit CudaMlp(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loco

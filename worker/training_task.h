// TrainingTask: what loco-worker's training loop needs from a built-in model
// and its data: the flat parameter count and initial values, the number of
// training samples (for the BatchSampler), the loss and gradient of a set of
// samples, and an evaluation on held-out data. Two tasks exist: the MLP on
// Fashion-MNIST and the character-level transformer on a text corpus.
//
// Not thread-safe (models keep scratch activations); one per thread:
// NewReplica gives another thread (another local rank) its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/gradient_ready.h"
#include "common/status.h"
#include "models/char_transformer.h"
#include "models/eval_result.h"
#include "models/ready_granularity.h"

namespace loco {

class TrainingTask {
 public:
  virtual ~TrainingTask() = default;
  virtual size_t num_parameters() const = 0;
  virtual std::vector<float> InitialParameters(uint64_t seed) const = 0;
  virtual size_t num_train_samples() const = 0;
  // Mean loss of the training samples `indices` (each < num_train_samples(),
  // non-empty); writes the gradient into grads (resized to num_parameters():
  // a vector of that size is written in place). `ready` (optional) is told
  // as parts of the gradient become final (common/gradient_ready.h); a task
  // may never call it.
  virtual StatusOr<double> LossAndGradient(std::span<const float> params,
                                           std::span<const size_t> indices,
                                           std::vector<float>* grads,
                                           const GradientReady& ready = {}) = 0;
  // For a task that computes on a CUDA device: as LossAndGradient, but the
  // gradient stays in that device's memory, at device_gradient()
  // (num_parameters() floats, valid until the next call), for a Worker whose
  // WorkerOptions::gradient_device is that device. `ready` as for
  // LossAndGradient, for the device array. Empty `indices`: a zero gradient
  // and loss 0. Host tasks: Unimplemented.
  virtual StatusOr<double> LossAndDeviceGradient(std::span<const float> params,
                                                 std::span<const size_t> indices,
                                                 const GradientReady& ready = {}) {
    return Unimplemented("this task computes on the host; its gradient is never on a device");
  }
  // The device array LossAndDeviceGradient writes; empty for host tasks.
  virtual std::span<const float> device_gradient() const { return {}; }

  // Held-out metrics: test set (MLP) or validation windows (language model).
  virtual StatusOr<EvalResult> Evaluate(std::span<const float> params) = 0;
  // A task for local rank `local_rank` (another thread): the same model and
  // data, its own scratch memory (and, for a task on CUDA, CUDA device
  // `local_rank`). The data are shared (read-only), not copied, so N local
  // ranks hold one copy of the data set.
  virtual StatusOr<std::unique_ptr<TrainingTask>> NewReplica(size_t local_rank) const = 0;
};

// Where the MLP computes: the CPU (OpenBLAS), or CUDA device 0 (CudaMlp,
// models/mlp_cuda.h) for local rank 0 and device r for replica r, with
// batches of up to max_batch samples.
struct MlpDevice {
  bool cuda = false;
  size_t max_batch = 0;  // CUDA only; >= 1
  // CPU only: Mlp::set_small_batch_gemm (false: every product on OpenBLAS).
  bool small_batch_gemm = true;
  // CPU only: Mlp::set_ready_granularity (when the overlapped step hears
  // that a part of the gradient is final).
  ReadyGranularity ready_granularity = ReadyGranularity::kPanel;
};

// The MLP {784, hidden..., 10} on Fashion-MNIST read from data_dir.
StatusOr<std::unique_ptr<TrainingTask>> MakeMlpTask(const std::string& data_dir,
                                                    const std::vector<size_t>& hidden,
                                                    MlpDevice device = {});

// The CharTransformer on TextCorpus::Load(corpus_dir); evaluation uses
// eval_windows validation windows spread evenly over the validation text
// (all of them when there are fewer).
StatusOr<std::unique_ptr<TrainingTask>> MakeCharLmTask(const std::string& corpus_dir,
                                                       const CharTransformerConfig& config,
                                                       size_t eval_windows);

}  // namespace loco

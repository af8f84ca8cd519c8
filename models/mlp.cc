#include "models/mlp.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "models/gemm.h"

namespace loco {

bool Mlp::UseSmallBatchGemm(size_t n, size_t o, size_t i) const {
  // The small-batch loops run on one thread: with more OpenBLAS threads
  // (--blas-threads) its products are the faster ones.
  return small_batch_allowed_ && SmallBatchGemm::Suits(n, o, i) &&
         openblas_get_num_threads() == 1;
}

StatusOr<Mlp> Mlp::Create(std::vector<size_t> layer_sizes) {
  if (layer_sizes.size() < 2) {
    return InvalidArgument("Mlp: need at least an input and an output size, got " +
                           std::to_string(layer_sizes.size()) + " layer size(s)");
  }
  for (size_t s : layer_sizes) {
    if (s == 0 || s > (size_t{1} << 24)) {
      return InvalidArgument("Mlp: layer size " + std::to_string(s) +
                             " is out of range; expected 1 .. 16777216");
    }
  }
  return Mlp(std::move(layer_sizes));
}

Mlp::Mlp(std::vector<size_t> sizes) : sizes_(std::move(sizes)) {
  size_t off = 0;
  for (size_t k = 0; k + 1 < sizes_.size(); ++k) {
    const size_t in = sizes_[k], out = sizes_[k + 1];
    tensors_.push_back({"w" + std::to_string(k), off, out * in, out, in});
    off += out * in;
    tensors_.push_back({"b" + std::to_string(k), off, out, 1, out});
    off += out;
  }
  num_params_ = off;
  acts_.resize(sizes_.size() - 1);
}

std::vector<float> Mlp::InitialParameters(uint64_t seed) const {
  std::vector<float> p(num_params_);
  std::mt19937_64 rng(seed);
  for (size_t k = 0; k + 1 < sizes_.size(); ++k) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(sizes_[k]));
    for (int t = 0; t < 2; ++t) {
      const TensorInfo& ti = tensors_[2 * k + t];
      for (size_t i = 0; i < ti.size; ++i) {
        // 53 random bits -> [0, 1): portable, unlike std::uniform_real_distribution.
        const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
        p[ti.offset + i] = static_cast<float>(bound * (2.0 * u - 1.0));
      }
    }
  }
  return p;
}

Status Mlp::CheckBatch(std::span<const float> params, std::span<const float> images,
                       std::span<const uint8_t> labels) const {
  if (params.size() != num_params_) {
    return InvalidArgument("Mlp: params has " + std::to_string(params.size()) +
                           " elements; the model has " + std::to_string(num_params_));
  }
  if (labels.empty() || images.size() != labels.size() * num_inputs()) {
    return InvalidArgument("Mlp: " + std::to_string(images.size()) + " image values for " +
                           std::to_string(labels.size()) + " labels; expected a non-empty batch of " +
                           std::to_string(num_inputs()) + " values per label");
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= num_classes()) {
      return InvalidArgument("Mlp: label " + std::to_string(labels[i]) + " at index " +
                             std::to_string(i) + " is not a class in [0, " +
                             std::to_string(num_classes()) + ")");
    }
  }
  return Status::Ok();
}

void Mlp::Forward(const float* params, const float* images, size_t n) {
  const float* in = images;
  const size_t layers = sizes_.size() - 1;
  for (size_t k = 0; k < layers; ++k) {
    const size_t i = sizes_[k], o = sizes_[k + 1];
    const float* w = params + tensors_[2 * k].offset;
    const float* b = params + tensors_[2 * k + 1].offset;
    std::vector<float>& out = acts_[k];
    out.resize(n * o);
    for (size_t r = 0; r < n; ++r) std::copy(b, b + o, out.data() + r * o);
    if (UseSmallBatchGemm(n, o, i)) {
      small_batch_.Forward(in, n, w, o, i, out.data());
    } else {
      Gemm(false, true, n, o, i, in, i, w, i, 1.0f, out.data(), o);
    }
    if (k + 1 < layers) {
      for (float& x : out) x = std::max(x, 0.0f);
    }
    in = out.data();
  }
}

double Mlp::SoftmaxLoss(const uint8_t* labels, size_t n) {
  const size_t c = num_classes();
  std::vector<float>& z = acts_.back();
  double loss = 0;
  for (size_t r = 0; r < n; ++r) {
    float* row = z.data() + r * c;
    const float mx = *std::max_element(row, row + c);
    double sum = 0;
    for (size_t j = 0; j < c; ++j) sum += std::exp(static_cast<double>(row[j]) - mx);
    loss += std::log(sum) - (static_cast<double>(row[labels[r]]) - mx);
    for (size_t j = 0; j < c; ++j) {
      row[j] = static_cast<float>(std::exp(static_cast<double>(row[j]) - mx) / sum);
    }
  }
  return loss;
}

StatusOr<double> Mlp::LossAndGradient(std::span<const float> params,
                                      std::span<const float> images,
                                      std::span<const uint8_t> labels,
                                      std::vector<float>* grads, const GradientReady& ready) {
  LOCO_RETURN_IF_ERROR(CheckBatch(params, images, labels));
  const size_t n = labels.size(), c = num_classes();
  Forward(params.data(), images.data(), n);
  const double loss = SoftmaxLoss(labels.data(), n) / static_cast<double>(n);

  // No zero-fill of the whole vector (a 4-byte-per-parameter pass every
  // step): every weight gradient is written by its product (beta = 0) and
  // every bias gradient is zeroed below before it is summed.
  grads->resize(num_params_);
  // d(mean CE)/d(logits) = (softmax − onehot) / n.
  delta_ = acts_.back();
  const float inv_n = 1.0f / static_cast<float>(n);
  for (size_t r = 0; r < n; ++r) {
    delta_[r * c + labels[r]] -= 1.0f;
    for (size_t j = 0; j < c; ++j) delta_[r * c + j] *= inv_n;
  }
  for (size_t k = sizes_.size() - 1; k-- > 0;) {
    const size_t i = sizes_[k], o = sizes_[k + 1];
    const float* in = k == 0 ? images.data() : acts_[k - 1].data();
    const float* w = params.data() + tensors_[2 * k].offset;
    float* dw = grads->data() + tensors_[2 * k].offset;
    float* db = grads->data() + tensors_[2 * k + 1].offset;
    std::fill(db, db + o, 0.0f);
    for (size_t r = 0; r < n; ++r) {
      for (size_t j = 0; j < o; ++j) db[j] += delta_[r * o + j];
    }
    // δᵀ · input, in panels of rows from the last one up: layer k's weights
    // and bias come after every earlier layer's in the flat layout, so
    // everything from a panel's first row on is final once it is computed,
    // and can be pushed while the next panel computes. Panels with or
    // without a listener: BLAS may sum in another order for another
    // shape, and the gradient must not depend on who listens.
    const bool small = UseSmallBatchGemm(n, o, i);
    const size_t panels = std::clamp<size_t>(o * i / kMinPanelElements, 1, kMaxPanels);
    const size_t rows = (o + panels - 1) / panels;
    for (size_t end = o; end > 0;) {
      const size_t begin = end > rows ? end - rows : 0;
      if (small) {
        small_batch_.WeightGradient(delta_.data(), n, o, in, i, begin, end, dw);
      } else {
        Gemm(true, false, end - begin, i, n, delta_.data() + begin, o, in, i, 0.0f,
             dw + begin * i, i);
      }
      if (ready && ready_granularity_ == ReadyGranularity::kPanel) {
        ready(tensors_[2 * k].offset + begin * i);
      }
      end = begin;
    }
    if (k > 0) BackpropagateDelta(k, n, w, small);
    if (ready && ready_granularity_ == ReadyGranularity::kTensor) ready(tensors_[2 * k].offset);
  }
  return loss;
}

void Mlp::BackpropagateDelta(size_t k, size_t n, const float* w, bool small) {
  const size_t i = sizes_[k], o = sizes_[k + 1];
  delta_prev_.resize(n * i);
  if (small) {  // δ · W
    small_batch_.InputGradient(delta_.data(), n, w, o, i, delta_prev_.data());
  } else {
    Gemm(false, false, n, i, o, delta_.data(), o, w, i, 0.0f, delta_prev_.data(), i);
  }
  const std::vector<float>& a = acts_[k - 1];
  for (size_t x = 0; x < n * i; ++x) {
    if (a[x] <= 0.0f) delta_prev_[x] = 0.0f;  // ReLU'
  }
  std::swap(delta_, delta_prev_);
}

StatusOr<EvalResult> Mlp::Evaluate(std::span<const float> params, std::span<const float> images,
                                   std::span<const uint8_t> labels, size_t chunk) {
  LOCO_RETURN_IF_ERROR(CheckBatch(params, images, labels));
  if (chunk == 0) return InvalidArgument("Mlp::Evaluate: chunk must be >= 1");
  const size_t total = labels.size(), in = num_inputs(), c = num_classes();
  size_t correct = 0;
  double loss = 0;
  for (size_t start = 0; start < total; start += chunk) {
    const size_t n = std::min(chunk, total - start);
    Forward(params.data(), images.data() + start * in, n);
    const std::vector<float>& z = acts_.back();
    for (size_t r = 0; r < n; ++r) {
      const float* row = z.data() + r * c;
      correct += static_cast<size_t>(std::max_element(row, row + c) - row) ==
                 labels[start + r];
    }
    loss += SoftmaxLoss(labels.data() + start, n);
  }
  return EvalResult{static_cast<double>(correct) / static_cast<double>(total),
                    loss / static_cast<double>(total)};
}

}  // namespace loco

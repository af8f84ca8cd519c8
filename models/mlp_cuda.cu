#include "models/mlp_cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/cuda_array.cuh"
#include "models/mlp.h"

namespace loco {
namespace {

constexpr int kThreads = 256;

int Blocks(size_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

// cuBLAS, loaded when the first CudaMlp is made rather than linked: a CPU
// worker never maps its libraries (~700 MB of cuBLAS and cuBLASLt, whose
// 94 KiB of static TLS every thread would otherwise carry).
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemv_v2) sgemv = nullptr;
};

template <typename F>
bool Resolve(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

// The process's one table (the library stays loaded: unloading cuBLAS
// under live handles is not allowed). Thread-safe (a function-local static).
StatusOr<const Cublas*> LoadCublas() {
  static const StatusOr<Cublas> loaded = []() -> StatusOr<Cublas> {
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      return Unavailable("cannot load " + name + " (" + (why ? why : "?") +
                         "); install the CUDA toolkit's cuBLAS or put it on LD_LIBRARY_PATH");
    }
    Cublas api;
    if (!Resolve(lib, "cublasCreate_v2", &api.create) ||
        !Resolve(lib, "cublasDestroy_v2", &api.destroy) ||
        !Resolve(lib, "cublasSetStream_v2", &api.set_stream) ||
        !Resolve(lib, "cublasSetMathMode", &api.set_math_mode) ||
        !Resolve(lib, "cublasSgemm_v2", &api.sgemm) ||
        !Resolve(lib, "cublasSgemv_v2", &api.sgemv)) {
      return Unavailable(name + " lacks a cuBLAS v2 entry point this build needs");
    }
    return api;
  }();
  if (!loaded.ok()) return loaded.status();
  return &loaded.value();
}

// cuBLAS errors become Status once, here.
Status CublasStatus(cublasStatus_t s, const char* expr) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  if (s == CUBLAS_STATUS_ALLOC_FAILED) {
    return ResourceExhausted(std::string(expr) + ": cuBLAS could not allocate memory");
  }
  return Internal(std::string(expr) + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}
#define LOCO_CUBLAS_RETURN_IF_ERROR(expr) LOCO_RETURN_IF_ERROR(CublasStatus((expr), #expr))

// y[r, c] += b[c]; then max(0, y) when relu.
__global__ void AddBiasKernel(float* y, const float* b, size_t rows, size_t cols, bool relu) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= rows * cols) return;
  const float v = y[i] + b[i % cols];
  y[i] = relu ? fmaxf(v, 0.0f) : v;
}

// One thread per sample: softmax of its logits, its cross-entropy in
// row_loss, and d(mean CE)/d(logits) = (softmax − onehot) / n into delta.
__global__ void SoftmaxXentKernel(const float* logits, const uint8_t* labels, size_t n,
                                  size_t classes, float* delta, double* row_loss,
                                  uint32_t* argmax) {
  const size_t r = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (r >= n) return;
  const float* z = logits + r * classes;
  float mx = z[0];
  uint32_t best = 0;
  for (size_t j = 1; j < classes; ++j) {
    if (z[j] > mx) {
      mx = z[j];
      best = static_cast<uint32_t>(j);
    }
  }
  double sum = 0;
  for (size_t j = 0; j < classes; ++j) sum += exp(static_cast<double>(z[j]) - mx);
  row_loss[r] = log(sum) - (static_cast<double>(z[labels[r]]) - mx);
  argmax[r] = best;
  if (delta == nullptr) return;
  const float inv_n = 1.0f / static_cast<float>(n);
  for (size_t j = 0; j < classes; ++j) {
    float p = static_cast<float>(exp(static_cast<double>(z[j]) - mx) / sum);
    if (j == labels[r]) p -= 1.0f;
    delta[r * classes + j] = p * inv_n;
  }
}

// delta[i] = 0 where the layer's post-ReLU activation is 0 (ReLU').
__global__ void ReluBackwardKernel(float* delta, const float* act, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n && act[i] <= 0.0f) delta[i] = 0.0f;
}

__global__ void FillKernel(float* x, size_t n, float v) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = v;
}


}  // namespace

struct CudaMlp::Impl {
  Mlp layout;  // the CPU model: tensor offsets and sizes, nothing else
  const Cublas* api = nullptr;
  int device = 0;
  size_t max_batch = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  std::vector<DeviceArray<float>> acts;  // acts[k]: output of layer k, max_batch × sizes[k+1]
  DeviceArray<float> delta, delta_prev, ones, images, params, grads;
  DeviceArray<uint8_t> labels;
  DeviceArray<double> row_loss;
  DeviceArray<uint32_t> argmax;
  PinnedArray<float> host_images, host_params;
  PinnedArray<uint8_t> host_labels;
  PinnedArray<double> host_row_loss;
  PinnedArray<uint32_t> host_argmax;

  explicit Impl(Mlp m) : layout(std::move(m)) {}
  ~Impl() {
    if (blas != nullptr) (void)api->destroy(blas);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }

  const std::vector<size_t>& sizes() const { return layout.layer_sizes(); }

  Status CheckBatch(std::span<const float> images_in, std::span<const uint8_t> labels_in) const {
    const size_t n = labels_in.size();
    if (n == 0 || n > max_batch || images_in.size() != n * layout.num_inputs()) {
      return InvalidArgument("CudaMlp: " + std::to_string(images_in.size()) +
                             " image values for " + std::to_string(n) +
                             " labels; expected a batch of 1.." + std::to_string(max_batch) +
                             " samples of " + std::to_string(layout.num_inputs()) + " values");
    }
    for (size_t i = 0; i < n; ++i) {
      if (labels_in[i] >= layout.num_classes()) {
        return InvalidArgument("CudaMlp: label " + std::to_string(labels_in[i]) + " at index " +
                               std::to_string(i) + " is not a class in [0, " +
                               std::to_string(layout.num_classes()) + ")");
      }
    }
    return Status::Ok();
  }

  // Host parameters to this->params through the pinned buffer (checked
  // against the model's size).
  Status UploadParams(std::span<const float> host) {
    const size_t count = layout.num_parameters();
    if (host.size() != count) {
      return InvalidArgument("CudaMlp: params has " + std::to_string(host.size()) +
                             " elements; the model has " + std::to_string(count));
    }
    LOCO_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    std::copy(host.begin(), host.end(), host_params.ptr);
    return LOCO_CUDA_STATUS(cudaMemcpyAsync(params.ptr, host_params.ptr, count * sizeof(float),
                                            cudaMemcpyHostToDevice, stream));
  }

  // Batch to the device through the pinned buffers.
  Status Upload(std::span<const float> images_in, std::span<const uint8_t> labels_in) {
    std::copy(images_in.begin(), images_in.end(), host_images.ptr);
    std::copy(labels_in.begin(), labels_in.end(), host_labels.ptr);
    LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(images.ptr, host_images.ptr,
                                              images_in.size_bytes(), cudaMemcpyHostToDevice,
                                              stream));
    LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(labels.ptr, host_labels.ptr, labels_in.size(),
                                              cudaMemcpyHostToDevice, stream));
    return Status::Ok();
  }

  // acts[k] = act(input · w_kᵀ + b_k). Row-major X[n×in] is column-major
  // Xᵀ; Y = X·Wᵀ is, column-major, Yᵀ = W·Xᵀ = op_T(Wᵀ)·Xᵀ.
  Status Forward(const float* d_params, size_t n) {
    const float one = 1.0f, zero = 0.0f;
    const float* in = images.ptr;
    const size_t layers = sizes().size() - 1;
    for (size_t k = 0; k < layers; ++k) {
      const size_t i = sizes()[k], o = sizes()[k + 1];
      const float* w = d_params + layout.tensors()[2 * k].offset;
      const float* b = d_params + layout.tensors()[2 * k + 1].offset;
      float* out = acts[k].ptr;
      LOCO_CUBLAS_RETURN_IF_ERROR(api->sgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(o),
                                              static_cast<int>(n), static_cast<int>(i), &one, w,
                                              static_cast<int>(i), in, static_cast<int>(i), &zero,
                                              out, static_cast<int>(o)));
      AddBiasKernel<<<Blocks(n * o), kThreads, 0, stream>>>(out, b, n, o, k + 1 < layers);
      LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      in = out;
    }
    return Status::Ok();
  }

  // Per-sample losses and predictions (and the logits' gradient into delta
  // when want_delta), copied back; returns Σ loss and counts correct answers.
  StatusOr<double> Loss(const uint8_t* host_labels_in, size_t n, bool want_delta,
                        size_t* correct) {
    SoftmaxXentKernel<<<Blocks(n), kThreads, 0, stream>>>(
        acts.back().ptr, labels.ptr, n, layout.num_classes(), want_delta ? delta.ptr : nullptr,
        row_loss.ptr, argmax.ptr);
    LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_row_loss.ptr, row_loss.ptr, n * sizeof(double),
                                              cudaMemcpyDeviceToHost, stream));
    LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_argmax.ptr, argmax.ptr, n * sizeof(uint32_t),
                                              cudaMemcpyDeviceToHost, stream));
    LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    double sum = 0;
    for (size_t r = 0; r < n; ++r) {
      sum += host_row_loss.ptr[r];
      if (correct != nullptr) *correct += host_argmax.ptr[r] == host_labels_in[r];
    }
    return sum;
  }

  // Gradients layer by layer from the logits' delta. Column-major views:
  // dWᵀ = Xᵀ·δ → op_N(Xᵀ)·op_T(δᵀ); δ_prevᵀ = Wᵀ·δᵀ → op_N(Wᵀ)·op_N(δᵀ);
  // db = δᵀ·1 (a matrix-vector product with a vector of ones).
  // `ready` (optional) is told, after each layer's gradients are computed
  // (last layer first), that d_grads from that layer's weights on is final:
  // the stream is synchronised first, so a reader on another stream sees
  // finished values. That costs a launch gap per layer, not a copy.
  Status Backward(const float* d_params, size_t n, float* d_grads, const GradientReady& ready) {
    const float one = 1.0f, zero = 0.0f;
    for (size_t k = sizes().size() - 1; k-- > 0;) {
      const size_t i = sizes()[k], o = sizes()[k + 1];
      const float* in = k == 0 ? images.ptr : acts[k - 1].ptr;
      const float* w = d_params + layout.tensors()[2 * k].offset;
      float* dw = d_grads + layout.tensors()[2 * k].offset;
      float* db = d_grads + layout.tensors()[2 * k + 1].offset;
      LOCO_CUBLAS_RETURN_IF_ERROR(api->sgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(i),
                                              static_cast<int>(o), static_cast<int>(n), &one, in,
                                              static_cast<int>(i), delta.ptr, static_cast<int>(o),
                                              &zero, dw, static_cast<int>(i)));
      LOCO_CUBLAS_RETURN_IF_ERROR(api->sgemv(blas, CUBLAS_OP_N, static_cast<int>(o),
                                              static_cast<int>(n), &one, delta.ptr,
                                              static_cast<int>(o), ones.ptr, 1, &zero, db, 1));
      if (ready) {
        LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
        ready(layout.tensors()[2 * k].offset);
      }
      if (k == 0) break;
      LOCO_CUBLAS_RETURN_IF_ERROR(api->sgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(i),
                                              static_cast<int>(n), static_cast<int>(o), &one, w,
                                              static_cast<int>(i), delta.ptr, static_cast<int>(o),
                                              &zero, delta_prev.ptr, static_cast<int>(i)));
      ReluBackwardKernel<<<Blocks(n * i), kThreads, 0, stream>>>(delta_prev.ptr,
                                                                 acts[k - 1].ptr, n * i);
      LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      std::swap(delta.ptr, delta_prev.ptr);
    }
    return Status::Ok();
  }
};

StatusOr<std::unique_ptr<CudaMlp>> CudaMlp::Create(std::vector<size_t> layer_sizes, int device,
                                                   size_t max_batch) {
  LOCO_RETURN_IF_ERROR(cuda::RequireDevice());
  if (max_batch == 0) return InvalidArgument("CudaMlp: max_batch must be >= 1");
  int count = 0;
  LOCO_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) {
    return InvalidArgument("CudaMlp: device " + std::to_string(device) + " is not in [0, " +
                           std::to_string(count) + ")");
  }
  StatusOr<Mlp> mlp = Mlp::Create(std::move(layer_sizes));
  if (!mlp.ok()) return mlp.status();
  StatusOr<const Cublas*> api = LoadCublas();
  if (!api.ok()) return api.status();
  auto impl = std::make_unique<Impl>(std::move(mlp).value());
  impl->api = *api;
  impl->device = device;
  impl->max_batch = max_batch;
  LOCO_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  LOCO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
  const Cublas* blas_api = impl->api;
  LOCO_CUBLAS_RETURN_IF_ERROR(blas_api->create(&impl->blas));
  LOCO_CUBLAS_RETURN_IF_ERROR(blas_api->set_stream(impl->blas, impl->stream));
  // Plain fp32 products (no TF32): the CPU reference is fp32.
  LOCO_CUBLAS_RETURN_IF_ERROR(blas_api->set_math_mode(impl->blas, CUBLAS_DEFAULT_MATH));
  const std::vector<size_t>& sizes = impl->sizes();
  const size_t widest = *std::max_element(sizes.begin(), sizes.end());
  impl->acts.resize(sizes.size() - 1);
  for (size_t k = 0; k + 1 < sizes.size(); ++k) {
    LOCO_RETURN_IF_ERROR(impl->acts[k].Allocate(max_batch * sizes[k + 1]));
  }
  const size_t params = impl->layout.num_parameters();
  LOCO_RETURN_IF_ERROR(impl->delta.Allocate(max_batch * widest));
  LOCO_RETURN_IF_ERROR(impl->delta_prev.Allocate(max_batch * widest));
  LOCO_RETURN_IF_ERROR(impl->ones.Allocate(max_batch));
  LOCO_RETURN_IF_ERROR(impl->images.Allocate(max_batch * sizes.front()));
  LOCO_RETURN_IF_ERROR(impl->params.Allocate(params));
  LOCO_RETURN_IF_ERROR(impl->grads.Allocate(params));
  LOCO_RETURN_IF_ERROR(impl->labels.Allocate(max_batch));
  LOCO_RETURN_IF_ERROR(impl->row_loss.Allocate(max_batch));
  LOCO_RETURN_IF_ERROR(impl->argmax.Allocate(max_batch));
  LOCO_RETURN_IF_ERROR(impl->host_images.Allocate(max_batch * sizes.front()));
  LOCO_RETURN_IF_ERROR(impl->host_params.Allocate(params));
  LOCO_RETURN_IF_ERROR(impl->host_labels.Allocate(max_batch));
  LOCO_RETURN_IF_ERROR(impl->host_row_loss.Allocate(max_batch));
  LOCO_RETURN_IF_ERROR(impl->host_argmax.Allocate(max_batch));
  FillKernel<<<Blocks(max_batch), kThreads, 0, impl->stream>>>(impl->ones.ptr, max_batch, 1.0f);
  LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl->stream));
  return std::unique_ptr<CudaMlp>(new CudaMlp(std::move(impl)));
}

CudaMlp::CudaMlp(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaMlp::~CudaMlp() = default;

size_t CudaMlp::num_parameters() const { return impl_->layout.num_parameters(); }
const std::vector<size_t>& CudaMlp::layer_sizes() const { return impl_->sizes(); }

StatusOr<double> CudaMlp::LossAndGradientOnDevice(const float* d_params,
                                                  std::span<const float> images,
                                                  std::span<const uint8_t> labels,
                                                  float* d_grads, const GradientReady& ready) {
  LOCO_RETURN_IF_ERROR(impl_->CheckBatch(images, labels));
  LOCO_CUDA_RETURN_IF_ERROR(cudaSetDevice(impl_->device));
  const size_t n = labels.size();
  LOCO_RETURN_IF_ERROR(impl_->Upload(images, labels));
  LOCO_RETURN_IF_ERROR(impl_->Forward(d_params, n));
  StatusOr<double> sum = impl_->Loss(labels.data(), n, /*want_delta=*/true, nullptr);
  if (!sum.ok()) return sum.status();
  LOCO_RETURN_IF_ERROR(impl_->Backward(d_params, n, d_grads, ready));
  LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream));
  return *sum / static_cast<double>(n);
}

StatusOr<double> CudaMlp::LossAndGradient(std::span<const float> params,
                                          std::span<const float> images,
                                          std::span<const uint8_t> labels,
                                          std::vector<float>* grads) {
  const size_t count = num_parameters();
  LOCO_RETURN_IF_ERROR(impl_->CheckBatch(images, labels));
  LOCO_RETURN_IF_ERROR(impl_->UploadParams(params));
  StatusOr<double> loss =
      LossAndGradientOnDevice(impl_->params.ptr, images, labels, impl_->grads.ptr);
  if (!loss.ok()) return loss.status();
  grads->resize(count);
  // The pinned parameter buffer is free again: the gradient comes back
  // through it.
  LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(impl_->host_params.ptr, impl_->grads.ptr,
                                            count * sizeof(float), cudaMemcpyDeviceToHost,
                                            impl_->stream));
  LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream));
  std::copy(impl_->host_params.ptr, impl_->host_params.ptr + count, grads->data());
  return loss;
}

StatusOr<double> CudaMlp::LossAndGradientKeptOnDevice(std::span<const float> params,
                                                      std::span<const float> images,
                                                      std::span<const uint8_t> labels,
                                                      const GradientReady& ready) {
  if (labels.empty() && images.empty()) {
    LOCO_CUDA_RETURN_IF_ERROR(cudaSetDevice(impl_->device));
    LOCO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(impl_->grads.ptr, 0,
                                              num_parameters() * sizeof(float), impl_->stream));
    LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream));
    return 0.0;
  }
  LOCO_RETURN_IF_ERROR(impl_->CheckBatch(images, labels));
  LOCO_RETURN_IF_ERROR(impl_->UploadParams(params));
  return LossAndGradientOnDevice(impl_->params.ptr, images, labels, impl_->grads.ptr, ready);
}

std::span<const float> CudaMlp::device_gradients() const {
  return {impl_->grads.ptr, num_parameters()};
}

StatusOr<EvalResult> CudaMlp::Evaluate(std::span<const float> params,
                                       std::span<const float> images,
                                       std::span<const uint8_t> labels) {
  const size_t in = impl_->layout.num_inputs();
  if (labels.empty() || images.size() != labels.size() * in) {
    return InvalidArgument("CudaMlp::Evaluate: " + std::to_string(images.size()) +
                           " image values for " + std::to_string(labels.size()) + " labels");
  }
  LOCO_RETURN_IF_ERROR(impl_->UploadParams(params));
  size_t correct = 0;
  double loss = 0;
  for (size_t start = 0; start < labels.size(); start += impl_->max_batch) {
    const size_t n = std::min(impl_->max_batch, labels.size() - start);
    auto img = images.subspan(start * in, n * in);
    auto lab = labels.subspan(start, n);
    LOCO_RETURN_IF_ERROR(impl_->CheckBatch(img, lab));
    LOCO_RETURN_IF_ERROR(impl_->Upload(img, lab));
    LOCO_RETURN_IF_ERROR(impl_->Forward(impl_->params.ptr, n));
    StatusOr<double> sum = impl_->Loss(lab.data(), n, /*want_delta=*/false, &correct);
    if (!sum.ok()) return sum.status();
    loss += *sum;
  }
  const double total = static_cast<double>(labels.size());
  return EvalResult{static_cast<double>(correct) / total, loss / total};
}

}  // namespace loco

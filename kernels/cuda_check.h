// The one place where CUDA runtime errors become loco::Status.
//
// Every CUDA runtime call in the kernels goes through LOCO_CUDA_RETURN_IF_ERROR
// (or CudaStatus), so a failure reports the failing expression, file:line and
// cudaGetErrorString instead of being dropped. Kernel launches are checked
// with LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError()) right after the launch.
//
// Included only by code built with the CUDA toolkit (the .cu kernels and the
// CUDA parity tests); plain C++ callers use kernels/device.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "common/status.h"

namespace loco::cuda {

// OK for cudaSuccess, otherwise Internal("file:line: expr: <name>: <string>").
// cudaErrorMemoryAllocation maps to ResourceExhausted, a missing driver or
// device to Unavailable.
Status CudaStatus(cudaError_t err, const char* expr, const char* file, int line);

// Unavailable with a clear message when no CUDA device can be used; the
// cuda:: entry points call it before touching device memory.
Status RequireDevice();

inline cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

// Stream-ordered device scratch memory (cudaMallocAsync) freed on the same
// stream when the owner goes out of scope. Not copyable; single-threaded use.
class DeviceScratch {
 public:
  explicit DeviceScratch(cudaStream_t stream) : stream_(stream) {}
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch() {
    if (ptr_ != nullptr) (void)cudaFreeAsync(ptr_, stream_);
  }
  // Allocates `bytes` (once per object) and zero-fills them on the stream.
  Status AllocateZeroed(size_t bytes);
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

}  // namespace loco::cuda

#define LOCO_CUDA_STATUS(expr) ::loco::cuda::CudaStatus((expr), #expr, __FILE__, __LINE__)

// Returns the CUDA error of `expr` as a Status from the enclosing function.
#define LOCO_CUDA_RETURN_IF_ERROR(expr)                                 \
  do {                                                                  \
    ::loco::Status loco_cuda_status_ = LOCO_CUDA_STATUS(expr);          \
    if (!loco_cuda_status_.ok()) return loco_cuda_status_;              \
  } while (0)

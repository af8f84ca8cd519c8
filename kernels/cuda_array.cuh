// CudaArray: device memory (cudaMalloc) or page-locked host memory
// (cudaMallocHost: fast, asynchronous copies), freed with the owner. For the
// worker's CUDA code only (included by .cu files).
//
// Movable (a vector of them can grow), not copyable.
// Allocate once; a failure leaves ptr null and returns the CUDA error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/cuda_check.h"

namespace loco {

enum class CudaMemory { kDevice, kPinnedHost };

template <typename T, CudaMemory kWhere>
struct CudaArray {
  T* ptr = nullptr;
  CudaArray() = default;
  CudaArray(const CudaArray&) = delete;
  CudaArray& operator=(const CudaArray&) = delete;
  CudaArray(CudaArray&& other) noexcept : ptr(other.ptr) { other.ptr = nullptr; }
  CudaArray& operator=(CudaArray&&) = delete;
  ~CudaArray() {
    if (ptr == nullptr) return;
    (void)(kWhere == CudaMemory::kDevice ? cudaFree(ptr) : cudaFreeHost(ptr));
  }
  Status Allocate(size_t count) {
    void** out = reinterpret_cast<void**>(&ptr);
    return kWhere == CudaMemory::kDevice
               ? LOCO_CUDA_STATUS(cudaMalloc(out, count * sizeof(T)))
               : LOCO_CUDA_STATUS(cudaMallocHost(out, count * sizeof(T)));
  }
};
template <typename T>
using DeviceArray = CudaArray<T, CudaMemory::kDevice>;
template <typename T>
using PinnedArray = CudaArray<T, CudaMemory::kPinnedHost>;

}  // namespace loco

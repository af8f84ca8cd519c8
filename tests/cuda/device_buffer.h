// Test helper: an owning device allocation with host upload/download.
// Failures are reported as GoogleTest failures by the callers (ok()).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <vector>

namespace loco::testing {

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    // One extra element so that an offset view (data() + 1) stays in bounds,
    // and so a zero-length buffer still has a distinct non-null pointer.
    ok_ = cudaMalloc(reinterpret_cast<void**>(&ptr_), (n + 1) * sizeof(T)) == cudaSuccess;
    if (ok_) ok_ = cudaMemset(ptr_, 0, (n + 1) * sizeof(T)) == cudaSuccess;
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { Upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
  }

  bool ok() const { return ok_; }
  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  size_t size() const { return n_; }

  void Upload(const std::vector<T>& host, size_t offset = 0) {
    if (ok_ && !host.empty()) {
      ok_ = cudaMemcpy(ptr_ + offset, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) ==
            cudaSuccess;
    }
  }
  std::vector<T> Download(size_t offset = 0) {
    std::vector<T> host(n_ - offset);
    if (ok_ && !host.empty()) {
      ok_ = cudaMemcpy(host.data(), ptr_ + offset, host.size() * sizeof(T), cudaMemcpyDeviceToHost) ==
            cudaSuccess;
    }
    return host;
  }

 private:
  size_t n_;
  T* ptr_ = nullptr;
  bool ok_ = false;
};

}  // namespace loco::testing

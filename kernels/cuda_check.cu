// CUDA error conversion and device discovery (kernels/device.h).
#include "kernels/cuda_check.h"

#include <string>

#include "kernels/device.h"

namespace loco::cuda {

Status CudaStatus(cudaError_t err, const char* expr, const char* file, int line) {
  if (err == cudaSuccess) return Status::Ok();
  std::string message = std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " +
                        cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  switch (err) {
    case cudaErrorMemoryAllocation:
      return ResourceExhausted(std::move(message));
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return Unavailable(std::move(message));
    default:
      return Internal(std::move(message));
  }
}

bool BuiltWithCuda() { return true; }

int DeviceCount() {
  int count = 0;
  // Without a driver or device this fails; that only means "no device here".
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear it, so the next CUDA call does not report it again
    return 0;
  }
  return count;
}

Status RequireDevice() {
  if (DeviceCount() > 0) return Status::Ok();
  return Unavailable("no CUDA device is available (cudaGetDeviceCount found none or no driver); "
                     "use the cpu:: kernels on this machine");
}

Status DeviceScratch::AllocateZeroed(size_t bytes) {
  if (ptr_ != nullptr) return Internal("DeviceScratch::AllocateZeroed called twice");
  LOCO_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&ptr_, bytes, stream_));
  LOCO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ptr_, 0, bytes, stream_));
  return Status::Ok();
}

}  // namespace loco::cuda

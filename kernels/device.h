// CUDA device discovery. Safe to call in builds without CUDA (returns 0).
#pragma once

namespace loco::cuda {

// True when this build compiled the CUDA kernels.
bool BuiltWithCuda();
// Number of usable CUDA devices; 0 without CUDA, driver or device.
int DeviceCount();

}  // namespace loco::cuda

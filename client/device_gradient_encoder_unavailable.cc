// DeviceGradientEncoder in builds without CUDA: Create says so.
#include "client/device_gradient_encoder.h"

namespace loco {

struct DeviceGradientEncoder::Impl {};

StatusOr<std::unique_ptr<DeviceGradientEncoder>> DeviceGradientEncoder::Create(
    const WorkerOptions&, uint64_t, uint64_t, size_t, int) {
  return Unimplemented(
      "this build has no CUDA support: gradients on a device need a build with the CUDA "
      "toolkit (LOCO_CUDA=ON or AUTO with nvcc found); use --device cpu");
}

DeviceGradientEncoder::DeviceGradientEncoder(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
DeviceGradientEncoder::~DeviceGradientEncoder() = default;
Status DeviceGradientEncoder::Encode(std::span<const float>, int64_t, v1::Payload*,
                                     EncodeStats*) {
  return Unimplemented("this build has no CUDA support");
}
void DeviceGradientEncoder::Commit() {}
void DeviceGradientEncoder::Discard() {}
size_t DeviceGradientEncoder::state_bytes() const { return 0; }
size_t DeviceGradientEncoder::WireBytes() const { return 0; }

}  // namespace loco

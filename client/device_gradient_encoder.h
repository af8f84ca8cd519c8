// DeviceGradientEncoder: the ShardEncoder (client/shard_encoder.h) for a
// gradient in CUDA device memory, for workers whose model computes on a GPU.
//
// Block codecs (naive, ef, loco): cuda::LocoCompress runs on the device with
// the error state in device memory; only the payload (codes and scales,
// about 0.53 bytes per element at 4 bits) is copied, through page-locked
// host memory, into the message gRPC sends. The gradient itself never
// crosses the bus. fp32 and bf16: the slice is copied to page-locked memory
// and encoded there by a GradientEncoder (they are references, not the
// point of a device path).
//
// For the same gradient and options it produces the same payload bytes as
// GradientEncoder (the kernels' codes and scales are bit-identical to the
// CPU's under nearest rounding; tests/cuda/device_gradient_encoder_test.cc).
// EncodeStats::error_sq_norm is summed on the device in another order, so it
// agrees to rounding only.
//
// All device work runs on the encoder's own stream, on `device`; Encode
// returns once its payload is in *out. Builds without CUDA compile a stub
// whose Create returns Unimplemented; Create returns Unavailable without a
// usable device.
//
// Not thread-safe; one encoder per shard, used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"
#include "client/shard_encoder.h"
#include "client/worker_options.h"

namespace loco {

class DeviceGradientEncoder final : public ShardEncoder {
 public:
  // As GradientEncoder's constructor, plus the CUDA device that holds the
  // gradient. Allocates the state and staging buffers for `length` elements.
  static StatusOr<std::unique_ptr<DeviceGradientEncoder>> Create(const WorkerOptions& options,
                                                                 uint64_t worker_id,
                                                                 uint64_t offset, size_t length,
                                                                 int device);
  ~DeviceGradientEncoder() override;
  DeviceGradientEncoder(const DeviceGradientEncoder&) = delete;
  DeviceGradientEncoder& operator=(const DeviceGradientEncoder&) = delete;

  // grads: device memory on `device`, grads.size() == length; read only.
  Status Encode(std::span<const float> grads, int64_t step, v1::Payload* out,
                EncodeStats* stats) override;
  void Commit() override;
  void Discard() override;
  size_t state_bytes() const override;
  size_t WireBytes() const override;

 private:
  struct Impl;
  explicit DeviceGradientEncoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loco

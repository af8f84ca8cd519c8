// DeviceGradientEncoder on a CUDA device (contract:
// client/device_gradient_encoder.h).
#include "client/device_gradient_encoder.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include "kernels/adamw.h"
#include "kernels/cuda_check.h"
#include "kernels/loco_compress.h"
#include "kernels/quantize.h"
#include "kernels/cuda_array.cuh"
#include "client/gradient_encoder.h"

namespace loco {

struct DeviceGradientEncoder::Impl {
  WorkerOptions options;
  uint64_t worker_id = 0;
  uint64_t offset = 0;
  size_t length = 0;
  int device = 0;
  bool block_codec = false;
  LocoParams params;
  cudaStream_t stream = nullptr;
  // Block codecs: the error state (int8 codes and block scales, or fp32
  // values with error_bits 32) and the payload, on the device; the payload
  // again in page-locked memory for the copy into the message.
  DeviceArray<int8_t> state_codes;
  DeviceArray<float> state_scales, state_values;
  size_t state_bytes = 0;
  DeviceArray<uint8_t> codes;
  DeviceArray<float> scales;
  PinnedArray<uint8_t> host_codes;
  PinnedArray<float> host_scales;
  // fp32 and bf16: the slice in page-locked memory, encoded on the host.
  PinnedArray<float> host_grads;
  std::unique_ptr<GradientEncoder> host_encoder;
  bool pending = false;  // an Encode not yet confirmed by Commit

  ~Impl() {
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }

  bool has_state() const { return block_codec && params.mode != CompensationMode::kNaive; }

  // ê := 0 on the stream.
  Status ZeroState() {
    if (state_codes.ptr != nullptr) {
      LOCO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(state_codes.ptr, 0, length, stream));
    }
    if (state_scales.ptr != nullptr) {
      LOCO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
          state_scales.ptr, 0, NumBlocks(length, params.block_size) * sizeof(float), stream));
    }
    if (state_values.ptr != nullptr) {
      LOCO_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(state_values.ptr, 0, length * sizeof(float), stream));
    }
    return Status::Ok();
  }

  Status Allocate() {
    LOCO_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    LOCO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    if (!block_codec) {
      host_encoder = std::make_unique<GradientEncoder>(options, worker_id, offset, length);
      return host_grads.Allocate(length);
    }
    const size_t blocks = NumBlocks(length, params.block_size);
    if (has_state()) {
      if (params.error_bits == 32) {
        LOCO_RETURN_IF_ERROR(state_values.Allocate(length));
        state_bytes = 4 * length;
      } else {
        LOCO_RETURN_IF_ERROR(state_codes.Allocate(length));
        LOCO_RETURN_IF_ERROR(state_scales.Allocate(blocks));
        state_bytes = length + 4 * blocks;
      }
      LOCO_RETURN_IF_ERROR(ZeroState());
    }
    const size_t packed = PackedBytes(length, params.bits);
    LOCO_RETURN_IF_ERROR(codes.Allocate(packed));
    LOCO_RETURN_IF_ERROR(scales.Allocate(blocks));
    LOCO_RETURN_IF_ERROR(host_codes.Allocate(packed));
    LOCO_RETURN_IF_ERROR(host_scales.Allocate(blocks));
    return LOCO_CUDA_STATUS(cudaStreamSynchronize(stream));
  }

  Status EncodeBlock(const float* grads, int64_t step, v1::Payload* out, EncodeStats* stats) {
    LocoParams p = params;
    p.seed = StepRoundingSeed(options.seed, worker_id, step);
    if (pending) {  // an earlier Encode that was never confirmed
      LOCO_RETURN_IF_ERROR(ZeroState());
      pending = false;
    }
    ErrorStateView view{};
    if (has_state()) view = {state_codes.ptr, state_scales.ptr, state_values.ptr};
    const size_t packed = PackedBytes(length, p.bits);
    const size_t blocks = NumBlocks(length, p.block_size);
    LocoStats ls;
    // The kernel's statistics synchronise the stream, so the copies below
    // start after it.
    LOCO_RETURN_IF_ERROR(cuda::LocoCompress(grads, length, step, p, view, codes.ptr, scales.ptr,
                                            &ls, stream));
    LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_codes.ptr, codes.ptr, packed,
                                              cudaMemcpyDeviceToHost, stream));
    LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_scales.ptr, scales.ptr, blocks * sizeof(float),
                                              cudaMemcpyDeviceToHost, stream));
    // The header is written while the copies run.
    out->set_codec(v1::CODEC_BLOCK_QUANT);
    out->set_bits(static_cast<uint32_t>(p.bits));
    out->set_block_size(static_cast<uint32_t>(p.block_size));
    out->set_offset(offset);
    out->set_length(length);
    std::string* data = out->mutable_data();
    std::string* scale_bytes = out->mutable_scales();
    data->resize(packed);
    scale_bytes->resize(blocks * sizeof(float));
    LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    std::memcpy(data->data(), host_codes.ptr, packed);
    std::memcpy(scale_bytes->data(), host_scales.ptr, blocks * sizeof(float));
    stats->nonfinite = ls.nonfinite;
    stats->error_sq_norm = ls.error_sq_norm;
    pending = has_state();
    return Status::Ok();
  }
};

StatusOr<std::unique_ptr<DeviceGradientEncoder>> DeviceGradientEncoder::Create(
    const WorkerOptions& options, uint64_t worker_id, uint64_t offset, size_t length,
    int device) {
  LOCO_RETURN_IF_ERROR(cuda::RequireDevice());
  int count = 0;
  LOCO_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) {
    return InvalidArgument("DeviceGradientEncoder: CUDA device " + std::to_string(device) +
                           " does not exist (this machine has " + std::to_string(count) + ")");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->worker_id = worker_id;
  impl->offset = offset;
  impl->length = length;
  impl->device = device;
  impl->block_codec = IsBlockCodec(options.codec);
  impl->params = BlockCodecParams(options, offset);
  if (impl->block_codec) LOCO_RETURN_IF_ERROR(ValidateLocoParams(impl->params));
  LOCO_RETURN_IF_ERROR(impl->Allocate().Annotate("DeviceGradientEncoder on device " +
                                                 std::to_string(device)));
  return std::unique_ptr<DeviceGradientEncoder>(new DeviceGradientEncoder(std::move(impl)));
}

DeviceGradientEncoder::DeviceGradientEncoder(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
DeviceGradientEncoder::~DeviceGradientEncoder() = default;

Status DeviceGradientEncoder::Encode(std::span<const float> grads, int64_t step,
                                     v1::Payload* out, EncodeStats* stats) {
  Impl& m = *impl_;
  if (grads.size() != m.length) {
    return InvalidArgument("gradient slice has " + std::to_string(grads.size()) +
                           " elements; the shard at offset " + std::to_string(m.offset) +
                           " holds " + std::to_string(m.length));
  }
  *stats = EncodeStats{};
  LOCO_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.device));
  // The norm for the metrics, which the host cannot compute without the
  // gradient (a reduction on the device; synchronises the stream).
  double sq = 0;
  LOCO_RETURN_IF_ERROR(cuda::SquaredNorm(grads.data(), m.length, &sq, m.stream));
  if (m.block_codec) {
    LOCO_RETURN_IF_ERROR(m.EncodeBlock(grads.data(), step, out, stats));
  } else {
    LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(m.host_grads.ptr, grads.data(),
                                              m.length * sizeof(float), cudaMemcpyDeviceToHost,
                                              m.stream));
    LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m.stream));
    LOCO_RETURN_IF_ERROR(m.host_encoder->Encode(
        std::span<const float>(m.host_grads.ptr, m.length), step, out, stats));
  }
  stats->grad_sq_norm = sq;
  return Status::Ok();
}

void DeviceGradientEncoder::Commit() {
  impl_->pending = false;
  if (impl_->host_encoder) impl_->host_encoder->Commit();
}

void DeviceGradientEncoder::Discard() {
  if (impl_->host_encoder) impl_->host_encoder->Discard();
  if (!impl_->pending) return;
  // A failed reset is retried by the next Encode (pending stays set).
  if (cudaSetDevice(impl_->device) == cudaSuccess && impl_->ZeroState().ok() &&
      cudaStreamSynchronize(impl_->stream) == cudaSuccess) {
    impl_->pending = false;
  }
}

size_t DeviceGradientEncoder::state_bytes() const { return impl_->state_bytes; }

size_t DeviceGradientEncoder::WireBytes() const {
  return PayloadWireBytes(impl_->options, impl_->length);
}

}  // namespace loco

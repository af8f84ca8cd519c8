// CUDA decode-and-accumulate (kernels/decode_accumulate.h).
//
// Validation contract: `out` is written only after every payload has been
// validated, with the checks, order and messages of loco::ValidatePayload.
// What the host can see (codec, bits, block size, sizes, null pointers) is
// checked on the host. What lives in device memory (every scale finite and
// >= 0; fp32 and bf16 data finite) is checked by a first kernel, one launch
// for all payloads, that records the index of the first offending element of
// each payload; the call copies those indices back and synchronises the
// stream, and only when all payloads are clean does the accumulate kernel
// run. On any error `out` is untouched. The call synchronises again before
// returning, so `out` is ready. The check reads the scales a second time
// (1/block_size of the codes) and the data of fp32/bf16 payloads a second time.
//
// Arithmetic, identical to cpu::DecodeAccumulate: per element, in payload
// order, acc = D(p_0); acc += D(p_k) in fp32; out = acc * (float)(1.0 / n)
// (n == 1: out = acc). The accumulate kernel reads each payload once and
// writes out once: one thread per 8 elements (which never straddle a
// quantization block, since block sizes are multiples of 32).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "kernels/call_checks.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_launch.cuh"
#include "kernels/decode_accumulate.h"
#include "kernels/quant_math.h"
#include "kernels/quantize.h"

namespace loco::cuda {
namespace {

constexpr unsigned long long kNoBadIndex = std::numeric_limits<unsigned long long>::max();

struct DevicePayload {
  PayloadCodec codec;
  int bits;
  int block_size;
  bool aligned16;  // data starts on a 16-byte boundary: vector loads allowed
  const uint8_t* data;
  const float* scales;
};

__device__ __forceinline__ uint32_t LoadLe32(const uint8_t* b) {
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
         static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
}

// first_bad[p] = the smallest index of an offending element of payload p:
// a scale that is not finite or is negative (block-quant), or a non-finite
// value (fp32, bf16). blockIdx.y strides over payloads, x over elements.
__global__ void FirstInvalidKernel(const DevicePayload* payloads, size_t num_payloads, size_t length,
                                   unsigned long long* first_bad) {
  for (size_t pi = blockIdx.y; pi < num_payloads; pi += gridDim.y) {
    const DevicePayload p = payloads[pi];
    const size_t count = p.codec == PayloadCodec::kBlockQuant
                             ? (length + static_cast<size_t>(p.block_size) - 1) / static_cast<size_t>(p.block_size)
                             : length;
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
      bool bad;
      if (p.codec == PayloadCodec::kBlockQuant) {
        const float v = p.scales[i];
        bad = !qmath::IsFinite(v) || v < 0.0f;
      } else if (p.codec == PayloadCodec::kBf16) {
        bad = ((p.data[2 * i] | p.data[2 * i + 1] << 8) & 0x7FFF) >= 0x7F80;
      } else {
        // Byte loads: fp32 payload data carries no alignment promise.
        bad = !qmath::IsFinite(qmath::BitsToFloat(LoadLe32(p.data + 4 * i)));
      }
      if (bad) atomicMin(first_bad + pi, static_cast<unsigned long long>(i));
    }
  }
}


// Decodes elements [first, first + count) of one payload into v[0..count).
__device__ __forceinline__ void DecodeChunk(const DevicePayload& p, size_t first, int count, float* v) {
  switch (p.codec) {
    case PayloadCodec::kFp32: {
      const uint8_t* src = p.data + first * 4;
      if (count == 8 && p.aligned16) {
        const float4 a = reinterpret_cast<const float4*>(src)[0];
        const float4 b = reinterpret_cast<const float4*>(src)[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
      } else {
        for (int k = 0; k < count; ++k) v[k] = qmath::BitsToFloat(LoadLe32(src + 4 * k));
      }
      break;
    }
    case PayloadCodec::kBf16: {
      const uint8_t* src = p.data + first * 2;
      if (count == 8 && p.aligned16) {
        const uint4 w = *reinterpret_cast<const uint4*>(src);
        const uint32_t words[4] = {w.x, w.y, w.z, w.w};
        for (int k = 0; k < 8; ++k) {
          v[k] = qmath::Bf16ToFp32(static_cast<uint16_t>(words[k / 2] >> (16 * (k % 2))));
        }
      } else {
        for (int k = 0; k < count; ++k) {
          v[k] = qmath::Bf16ToFp32(static_cast<uint16_t>(src[2 * k] | src[2 * k + 1] << 8));
        }
      }
      break;
    }
    case PayloadCodec::kBlockQuant: {
      const float scale = p.scales[first / static_cast<size_t>(p.block_size)];
      const uint8_t* src = p.data + first * static_cast<size_t>(p.bits) / 8;
      const uint32_t mask = (1u << p.bits) - 1u;
      for (int k = 0; k < count; ++k) {
        const int bit = k * p.bits;
        v[k] = qmath::Decode(qmath::FieldCode((src[bit / 8] >> (bit % 8)) & mask, p.bits), scale);
      }
      break;
    }
  }
}

__global__ void DecodeAccumulateKernel(const DevicePayload* payloads, int num_payloads,
                                       size_t length, float inv_n, float* out) {
  const size_t chunks = (length + 7) / 8;
  for (size_t c = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; c < chunks;
       c += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t first = c * 8;
    const int count = static_cast<int>(min(static_cast<size_t>(8), length - first));
    float acc[8];
    DecodeChunk(payloads[0], first, count, acc);
    for (int i = 1; i < num_payloads; ++i) {
      float v[8];
      DecodeChunk(payloads[i], first, count, v);
      for (int k = 0; k < count; ++k) acc[k] = qmath::Add(acc[k], v[k]);
    }
    if (num_payloads > 1) {
      for (int k = 0; k < count; ++k) acc[k] = qmath::Mul(acc[k], inv_n);
    }
    float* dst = out + first;
    if (count == 8 && Aligned16(dst)) {
      reinterpret_cast<float4*>(dst)[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      reinterpret_cast<float4*>(dst)[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    } else {
      for (int k = 0; k < count; ++k) dst[k] = acc[k];
    }
  }
}

// The message ValidatePayload gives for the first offending element `index`.
Status ContentError(const PayloadView& p, unsigned long long index, cudaStream_t s) {
  if (p.codec != PayloadCodec::kBlockQuant) {
    return InvalidArgument(std::string(PayloadCodecName(p.codec)) + " payload element " +
                           std::to_string(index) + " is not finite (NaN or Inf)");
  }
  float value = 0.0f;
  LOCO_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(&value, p.scales + index, sizeof(value), cudaMemcpyDeviceToHost, s));
  LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return InvalidArgument("block-quant payload: scale " + std::to_string(index) + " is " +
                         FormatPayloadFloat(value) + " (scales must be finite and >= 0)");
}

}  // namespace

Status DecodeAccumulate(const PayloadView* payloads, size_t n, size_t length, float* out,
                        void* stream) {
  if (n == 0 || payloads == nullptr) {
    return InvalidArgument("DecodeAccumulate needs at least one payload (got none)");
  }
  if (length > 0 && out == nullptr) {
    return InvalidArgument("DecodeAccumulate of " + std::to_string(length) +
                           " elements needs a non-null out");
  }
  // Payloads [0, checked) are well formed; shape_error() is payload `checked`'s
  // error when checked < n. Like the CPU, the first bad payload in order wins,
  // whether its problem is its shape or its content.
  size_t checked = 0;
  while (checked < n && ValidatePayloadShape(payloads[checked], length).ok()) ++checked;
  auto shape_error = [&] {
    return ValidatePayloadShape(payloads[checked], length).Annotate("payload " + std::to_string(checked));
  };
  if (checked == 0) return shape_error();
  LOCO_RETURN_IF_ERROR(RequireDevice());

  cudaStream_t s = AsStream(stream);
  // Scratch: the first-bad index of each payload, then the device descriptors
  // (used by both kernels).
  DeviceScratch scratch(s);
  const size_t index_bytes = checked * sizeof(unsigned long long);
  LOCO_RETURN_IF_ERROR(scratch.AllocateZeroed(index_bytes + checked * sizeof(DevicePayload)));
  auto* first_bad = scratch.as<unsigned long long>();
  auto* descriptors = reinterpret_cast<DevicePayload*>(scratch.as<uint8_t>() + index_bytes);
  std::vector<DevicePayload> host(checked);
  size_t check_count = 0;  // the most elements the check kernel visits in one payload
  for (size_t i = 0; i < checked; ++i) {
    const PayloadView& p = payloads[i];
    check_count = std::max(check_count, p.codec == PayloadCodec::kBlockQuant ? p.num_scales : length);
    host[i] = DevicePayload{p.codec, p.bits, p.block_size,
                            (reinterpret_cast<uintptr_t>(p.data) & 15u) == 0, p.data, p.scales};
  }
  LOCO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(descriptors, host.data(), checked * sizeof(DevicePayload),
                                            cudaMemcpyHostToDevice, s));
  LOCO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(first_bad, 0xFF, index_bytes, s));  // kNoBadIndex

  // Validate: one launch for all payloads, then wait for the verdict.
  if (length > 0) {
    const dim3 grid(ElementwiseGrid(check_count, kElementwiseThreads),
                    static_cast<unsigned>(std::min<size_t>(checked, 65535)));
    FirstInvalidKernel<<<grid, kElementwiseThreads, 0, s>>>(descriptors, checked, length, first_bad);
    LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  std::vector<unsigned long long> host_bad(checked, kNoBadIndex);
  LOCO_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_bad.data(), first_bad, index_bytes, cudaMemcpyDeviceToHost, s));
  LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  for (size_t i = 0; i < checked; ++i) {
    if (host_bad[i] != kNoBadIndex) {
      return ContentError(payloads[i], host_bad[i], s).Annotate("payload " + std::to_string(i));
    }
  }
  if (checked < n) return shape_error();
  if (length == 0) return Status::Ok();

  // Commit: every payload is valid.
  const float inv_n = static_cast<float>(1.0 / static_cast<double>(n));
  DecodeAccumulateKernel<<<ElementwiseGrid((length + 7) / 8, kElementwiseThreads), kElementwiseThreads, 0, s>>>(
      descriptors, static_cast<int>(n), length, inv_n, out);
  LOCO_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  LOCO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return Status::Ok();
}

}  // namespace loco::cuda

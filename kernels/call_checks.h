// Argument checks of the kernel entry points, shared by the cpu:: and cuda::
// versions so that both refuse the same calls with the same messages, before
// anything is written.
#pragma once

#include <cstddef>
#include <cstdint>

#include <string>

#include "common/status.h"
#include "kernels/adamw.h"
#include "kernels/decode_accumulate.h"
#include "kernels/loco_compress.h"
#include "kernels/quantize.h"

namespace loco {

// Quantize: valid bits/block size, a known rounding mode, index_offset a
// multiple of the block size, non-null buffers when n > 0.
Status ValidateQuantizeCall(const float* x, size_t n, const QuantizeParams& p,
                            const uint8_t* codes, const float* scales);
// LocoCompress: valid parameters, step >= 0, non-null buffers, and the error
// state that error_bits asks for (unless mode is naive).
Status ValidateLocoCall(const float* g, size_t n, int64_t step, const LocoParams& p,
                        const ErrorStateView& state, const uint8_t* codes, const float* scales);

// AdamW, once its hyper-parameters are valid: step >= 1 (steps are 1-based),
// grad_scale finite and >= 0, non-null buffers when n > 0.
Status ValidateAdamWCall(const float* params, const float* m, const float* v, const float* grad,
                         size_t n, int64_t step, float grad_scale);

// ValidatePayload's checks that need no access to the payload's contents
// (codec, bits/block size, byte and scale counts, non-null buffers), with its
// messages; CUDA runs these on the host and checks the contents on device.
Status ValidatePayloadShape(const PayloadView& p, size_t length);
// "fp32", "bf16", "block-quant" (for messages).
const char* PayloadCodecName(PayloadCodec c);
// A float in payload error messages (%g).
std::string FormatPayloadFloat(float v);

}  // namespace loco

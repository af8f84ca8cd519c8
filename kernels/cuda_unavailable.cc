// The cuda:: entry points for builds without CUDA: every call reports that
// the kernels were not compiled, so callers fall back or fail clearly.
#include "kernels/adamw.h"
#include "kernels/cast.h"
#include "kernels/decode_accumulate.h"
#include "kernels/device.h"
#include "kernels/loco_compress.h"
#include "kernels/quantize.h"

namespace loco::cuda {
namespace {
Status NoCuda() { return Unimplemented("this build has no CUDA kernels (configure with LOCO_CUDA=ON)"); }
}  // namespace

bool BuiltWithCuda() { return false; }
int DeviceCount() { return 0; }

Status Quantize(const float*, size_t, const QuantizeParams&, uint8_t*, float*, QuantizeStats*, void*) { return NoCuda(); }
Status Dequantize(const uint8_t*, const float*, size_t, int, int, float*, void*) { return NoCuda(); }
Status DequantizeAdd(const uint8_t*, const float*, size_t, int, int, float*, void*) {
  return NoCuda();
}
Status LocoCompress(const float*, size_t, int64_t, const LocoParams&, ErrorStateView, uint8_t*, float*, LocoStats*, void*) { return NoCuda(); }
Status DecodeAccumulate(const PayloadView*, size_t, size_t, float*, void*) { return NoCuda(); }
Status AdamW(float*, float*, float*, const float*, size_t, int64_t, const AdamWParams&, float, void*) { return NoCuda(); }
Status AdamW(float*, float*, float*, const float*, size_t, int64_t, const ValidatedAdamWParams&, float, void*) {
  return NoCuda();
}
Status SquaredNorm(const float*, size_t, double*, void*) { return NoCuda(); }
Status CastFp32ToBf16(const float*, size_t, uint16_t*, void*) { return NoCuda(); }
Status CastBf16ToFp32(const uint16_t*, size_t, float*, void*) { return NoCuda(); }

}  // namespace loco::cuda

#include "worker/param_payload_decoder.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cast.h"
#include "kernels/quantize.h"

namespace loco {
namespace {

Status AllFinite(const float* x, size_t n, const char* what) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      return DataLoss(std::string("pulled ") + what + " element " + std::to_string(i) +
                      " is not finite; the server must send finite values");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<size_t> ApplyPulledParams(const v1::PullResponse& response, uint64_t offset,
                                   bool have_any, uint64_t have_version,
                                   std::span<float> slice) {
  const v1::Payload& p = response.params();
  const size_t n = slice.size();
  if (p.offset() != offset || p.length() != n) {
    return DataLoss("pulled payload covers [" + std::to_string(p.offset()) + ", +" +
                    std::to_string(p.length()) + "); expected the shard's range [" +
                    std::to_string(offset) + ", +" + std::to_string(n) + ")");
  }
  const size_t wire = p.data().size() + p.scales().size();
  if (response.is_delta()) {
    if (!have_any || response.version() != have_version + 1) {
      return DataLoss("pulled a delta to version " + std::to_string(response.version()) +
                      " but the worker holds " +
                      (have_any ? "version " + std::to_string(have_version) : "nothing") +
                      "; a delta must apply to version - 1");
    }
    if (p.codec() != v1::CODEC_BLOCK_QUANT) {
      return DataLoss("pulled delta has codec " + v1::Codec_Name(p.codec()) +
                      "; expected CODEC_BLOCK_QUANT");
    }
    const int bits = static_cast<int>(p.bits());
    const int block = static_cast<int>(p.block_size());
    Status q = ValidateQuantizeParams(bits, block);
    if (!q.ok()) return q.Annotate("pulled delta");
    const size_t blocks = NumBlocks(n, block);
    if (p.data().size() != PackedBytes(n, bits) || p.scales().size() != 4 * blocks) {
      return DataLoss("pulled delta has " + std::to_string(p.data().size()) + " code bytes and " +
                      std::to_string(p.scales().size()) + " scale bytes; expected " +
                      std::to_string(PackedBytes(n, bits)) + " and " +
                      std::to_string(4 * blocks));
    }
    std::vector<float> scales(blocks);
    std::memcpy(scales.data(), p.scales().data(), p.scales().size());
    LOCO_RETURN_IF_ERROR(AllFinite(scales.data(), blocks, "delta scale"));
    std::vector<float> delta(n);
    LOCO_RETURN_IF_ERROR(cpu::Dequantize(reinterpret_cast<const uint8_t*>(p.data().data()),
                                         scales.data(), n, bits, block, delta.data()));
    for (size_t i = 0; i < n; ++i) slice[i] += delta[i];
    return wire;
  }
  std::vector<float> full(n);
  if (p.codec() == v1::CODEC_FP32) {
    if (p.data().size() != 4 * n) {
      return DataLoss("pulled fp32 copy has " + std::to_string(p.data().size()) +
                      " bytes; expected " + std::to_string(4 * n));
    }
    std::memcpy(full.data(), p.data().data(), 4 * n);
  } else if (p.codec() == v1::CODEC_BF16) {
    if (p.data().size() != 2 * n) {
      return DataLoss("pulled bf16 copy has " + std::to_string(p.data().size()) +
                      " bytes; expected " + std::to_string(2 * n));
    }
    std::vector<uint16_t> half(n);
    std::memcpy(half.data(), p.data().data(), 2 * n);
    cpu::CastBf16ToFp32(half.data(), n, full.data());
  } else {
    return DataLoss("pulled full copy has codec " + v1::Codec_Name(p.codec()) +
                    "; expected CODEC_FP32 or CODEC_BF16");
  }
  LOCO_RETURN_IF_ERROR(AllFinite(full.data(), n, "parameter"));
  std::memcpy(slice.data(), full.data(), 4 * n);
  return wire;
}

}  // namespace loco

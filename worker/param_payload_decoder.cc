#include "worker/param_payload_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cast.h"
#include "kernels/quantize.h"

namespace loco {
namespace {

// Elements dequantized per pass when a delta is added to the slice: bounded
// scratch (64 KiB) instead of a temporary as large as the shard.
constexpr size_t kDeltaChunk = 16384;

// The payload bytes as an array of T: the bytes themselves when suitably
// aligned (a std::string's heap buffer always is), else a copy in *scratch.
template <typename T>
const T* AsArray(const std::string& bytes, std::vector<T>* scratch) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(T) == 0) {
    return reinterpret_cast<const T*>(bytes.data());
  }
  scratch->resize(bytes.size() / sizeof(T));
  std::memcpy(scratch->data(), bytes.data(), scratch->size() * sizeof(T));
  return scratch->data();
}

// Index of the first non-finite value (exponent bits all ones), or n.
size_t FirstNonFiniteFp32(const uint32_t* bits, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if ((bits[i] & 0x7F800000u) == 0x7F800000u) return i;
  }
  return n;
}
size_t FirstNonFiniteBf16(const uint16_t* bits, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if ((bits[i] & 0x7F80u) == 0x7F80u) return i;
  }
  return n;
}

Status NotFinite(const char* what, size_t i) {
  return DataLoss(std::string("pulled ") + what + " element " + std::to_string(i) +
                  " is not finite; the server must send finite values");
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
    std::vector<float> scale_copy;
    const float* scales = AsArray(p.scales(), &scale_copy);
    for (size_t b = 0; b < blocks; ++b) {
      if (!std::isfinite(scales[b])) return NotFinite("delta scale", b);
    }
    // Validated: from here nothing can fail, so the slice is written in
    // place. Each chunk starts on a block boundary, hence on a byte boundary
    // of the codes (block sizes are multiples of 32, bits 2, 4 or 8).
    const auto* codes = reinterpret_cast<const uint8_t*>(p.data().data());
    const size_t chunk = std::max<size_t>(block, kDeltaChunk / block * block);
    std::vector<float> delta(std::min(n, chunk));
    for (size_t start = 0; start < n; start += chunk) {
      const size_t len = std::min(chunk, n - start);
      Status d = cpu::Dequantize(codes + start * bits / 8, scales + start / block, len, bits,
                                 block, delta.data());
      if (!d.ok()) return d.Annotate("pulled delta");  // unreachable after validation
      float* out = slice.data() + start;
      for (size_t i = 0; i < len; ++i) out[i] += delta[i];
    }
    return wire;
  }
  if (p.codec() == v1::CODEC_FP32) {
    if (p.data().size() != 4 * n) {
      return DataLoss("pulled fp32 copy has " + std::to_string(p.data().size()) +
                      " bytes; expected " + std::to_string(4 * n));
    }
    std::vector<uint32_t> copy;
    const uint32_t* bits = AsArray(p.data(), &copy);
    if (size_t i = FirstNonFiniteFp32(bits, n); i < n) return NotFinite("parameter", i);
    std::memcpy(slice.data(), bits, 4 * n);
    return wire;
  }
  if (p.codec() == v1::CODEC_BF16) {
    if (p.data().size() != 2 * n) {
      return DataLoss("pulled bf16 copy has " + std::to_string(p.data().size()) +
                      " bytes; expected " + std::to_string(2 * n));
    }
    std::vector<uint16_t> copy;
    const uint16_t* half = AsArray(p.data(), &copy);
    if (size_t i = FirstNonFiniteBf16(half, n); i < n) return NotFinite("parameter", i);
    cpu::CastBf16ToFp32(half, n, slice.data());
    return wire;
  }
  return DataLoss("pulled full copy has codec " + v1::Codec_Name(p.codec()) +
                  "; expected CODEC_FP32 or CODEC_BF16");
}

}  // namespace loco

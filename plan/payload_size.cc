#include "plan/payload_size.h"

#include "kernels/quantize.h"

namespace loco::plan {

Status ValidateEncoding(const WireEncoding& encoding, const std::string& what) {
  if (encoding.codec != WireCodec::kBlockQuant) return Status::Ok();
  Status s = ValidateQuantizeParams(encoding.bits, encoding.block_size);
  return s.ok() ? s : s.Annotate(what);
}

uint64_t PayloadBytes(const WireEncoding& encoding, uint64_t elements) {
  switch (encoding.codec) {
    case WireCodec::kFp32: return 4 * elements;
    case WireCodec::kBf16: return 2 * elements;
    case WireCodec::kBlockQuant: break;
  }
  return PackedBytes(elements, encoding.bits) +
         sizeof(float) * NumBlocks(elements, encoding.block_size);
}

std::string EncodingName(const WireEncoding& encoding) {
  switch (encoding.codec) {
    case WireCodec::kFp32: return "fp32";
    case WireCodec::kBf16: return "bf16";
    case WireCodec::kBlockQuant: break;
  }
  return std::to_string(encoding.bits) + "-bit/b" + std::to_string(encoding.block_size);
}

}  // namespace loco::plan

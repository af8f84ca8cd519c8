#include "server/owned_payload.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "common/format_double.h"
#include "kernels/cast.h"
#include "kernels/quantize.h"

namespace loco {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian; a big-endian host needs byte swaps");

}  // namespace

StatusOr<OwnedPayload> OwnedPayload::FromProto(const v1::Payload& wire, ShardRange range) {
  return Build(wire, range, DataHandling::kCopy, nullptr);
}

StatusOr<OwnedPayload> OwnedPayload::FromProto(v1::Payload&& wire, ShardRange range) {
  return Build(wire, range, DataHandling::kTake, wire.mutable_data());
}

Status OwnedPayload::Check(const v1::Payload& wire, ShardRange range) {
  return Build(wire, range, DataHandling::kLeave, nullptr).status();
}

StatusOr<OwnedPayload> OwnedPayload::Build(const v1::Payload& wire, ShardRange range,
                                           DataHandling handling, std::string* take_data) {
  if (wire.offset() != range.offset || wire.length() != range.length) {
    // Offset and length as sent: their sum may wrap for a hostile pair.
    return InvalidArgument(
        "payload has offset " + std::to_string(wire.offset()) + " and length " +
        std::to_string(wire.length()) + " but this shard is [" + std::to_string(range.offset) +
        ", " + std::to_string(range.offset + range.length) + "); send offset " +
        std::to_string(range.offset) + " and length " + std::to_string(range.length));
  }
  const size_t n = range.length;
  OwnedPayload p;
  switch (wire.codec()) {
    case v1::CODEC_FP32: p.codec = PayloadCodec::kFp32; break;
    case v1::CODEC_BF16: p.codec = PayloadCodec::kBf16; break;
    case v1::CODEC_BLOCK_QUANT: p.codec = PayloadCodec::kBlockQuant; break;
    default:
      return InvalidArgument("unknown codec " + std::to_string(static_cast<int>(wire.codec())) +
                             "; expected CODEC_FP32, CODEC_BF16 or CODEC_BLOCK_QUANT");
  }
  size_t want_data = 0, want_scales = 0;
  if (p.codec == PayloadCodec::kBlockQuant) {
    if (wire.bits() != 2 && wire.bits() != 4 && wire.bits() != 8) {
      return InvalidArgument("bits " + std::to_string(wire.bits()) +
                             " is not supported; expected 2, 4 or 8");
    }
    if (wire.block_size() < 32 || wire.block_size() > 4096 || wire.block_size() % 32 != 0) {
      return InvalidArgument("block_size " + std::to_string(wire.block_size()) +
                             " is invalid; expected a multiple of 32 in [32, 4096]");
    }
    p.bits = static_cast<int>(wire.bits());
    p.block_size = static_cast<int>(wire.block_size());
    want_data = PackedBytes(n, p.bits);
    want_scales = NumBlocks(n, p.block_size);
  } else {
    want_data = n * (p.codec == PayloadCodec::kFp32 ? 4 : 2);
  }
  if (wire.data().size() != want_data) {
    return InvalidArgument("data has " + std::to_string(wire.data().size()) + " bytes; " +
                           std::to_string(n) + " elements in this encoding need exactly " +
                           std::to_string(want_data));
  }
  if (wire.scales().size() != want_scales * 4) {
    return InvalidArgument("scales has " + std::to_string(wire.scales().size()) +
                           " bytes; expected " + std::to_string(want_scales) + " fp32 scales (" +
                           std::to_string(want_scales * 4) + " bytes)" +
                           (want_scales == 0 ? " for a codec without scales" : ""));
  }
  p.scales.resize(want_scales);
  if (want_scales > 0) std::memcpy(p.scales.data(), wire.scales().data(), want_scales * 4);
  for (size_t i = 0; i < p.scales.size(); ++i) {
    if (!std::isfinite(p.scales[i]) || p.scales[i] < 0) {
      return InvalidArgument("scale " + std::to_string(i) + " is " + std::to_string(p.scales[i]) +
                             "; scales must be finite and >= 0");
    }
  }
  if (p.codec == PayloadCodec::kBf16) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t b = 0;
      std::memcpy(&b, wire.data().data() + 2 * i, 2);
      if ((b & 0x7F80u) == 0x7F80u) {
        return InvalidArgument("bf16 element " + std::to_string(i) + " is not finite (" +
                               std::to_string(Bf16ToFp32(b)) + "); values must be finite");
      }
    }
  }
  if (p.codec == PayloadCodec::kFp32) {
    for (size_t i = 0; i < n; ++i) {
      float f = 0;
      std::memcpy(&f, wire.data().data() + 4 * i, 4);
      if (!std::isfinite(f)) {
        return InvalidArgument("fp32 element " + std::to_string(i) + " is not finite (" +
                               FormatDouble(f) + "); values must be finite");
      }
    }
  }
  // The kernels' own check is the final word (it is what DecodeAccumulate
  // will apply); running it here keeps a step from failing after acceptance.
  PayloadView unowned = p.view();
  unowned.data = reinterpret_cast<const uint8_t*>(wire.data().data());
  unowned.data_bytes = wire.data().size();
  LOCO_RETURN_IF_ERROR(ValidatePayload(unowned, n));
  switch (handling) {
    case DataHandling::kCopy: p.data = wire.data(); break;
    case DataHandling::kTake: p.data = std::move(*take_data); break;
    case DataHandling::kLeave: break;
  }
  return p;
}

Status OwnedPayload::CheckGradientMagnitude() const {
  if (codec == PayloadCodec::kBlockQuant) {
    const double max_code = static_cast<double>(1u << (bits - 1));
    const double max_scale = kMaxAbsGradient / max_code;
    for (size_t i = 0; i < scales.size(); ++i) {
      if (scales[i] > max_scale) {
        return InvalidArgument("scale " + std::to_string(i) + " is " + std::to_string(scales[i]) +
                               "; with " + std::to_string(bits) + "-bit codes scales must be <= " +
                               std::to_string(max_scale) + " (decoded gradients above 1e18 " +
                               "overflow AdamW's fp32 second moment)");
      }
    }
    return Status::Ok();
  }
  const size_t n = codec == PayloadCodec::kFp32 ? data.size() / 4 : data.size() / 2;
  for (size_t i = 0; i < n; ++i) {
    float f = 0;
    if (codec == PayloadCodec::kFp32) {
      std::memcpy(&f, data.data() + 4 * i, 4);
    } else {
      uint16_t b = 0;
      std::memcpy(&b, data.data() + 2 * i, 2);
      f = Bf16ToFp32(b);
    }
    if (std::fabs(static_cast<double>(f)) > kMaxAbsGradient) {
      return InvalidArgument("gradient element " + std::to_string(i) + " is " + FormatDouble(f) +
                             "; gradients must be within +-1e18 (larger values overflow "
                             "AdamW's fp32 second moment)");
    }
  }
  return Status::Ok();
}

PayloadView OwnedPayload::view() const {
  PayloadView v;
  v.codec = codec;
  v.bits = bits;
  v.block_size = block_size;
  v.data = reinterpret_cast<const uint8_t*>(data.data());
  v.data_bytes = data.size();
  v.scales = scales.data();
  v.num_scales = scales.size();
  return v;
}

}  // namespace loco

#include "client/push_codec.h"

#include <string>

namespace loco {

StatusOr<PushCodec> ParsePushCodec(std::string_view name) {
  if (name == "fp32") return PushCodec::kFp32;
  if (name == "bf16") return PushCodec::kBf16;
  if (name == "naive") return PushCodec::kNaive;
  if (name == "ef") return PushCodec::kEf;
  if (name == "loco") return PushCodec::kLoco;
  return InvalidArgument("unknown push codec '" + std::string(name) + "'; expected one of " +
                         std::string(kPushCodecChoices));
}

const char* PushCodecName(PushCodec codec) {
  switch (codec) {
    case PushCodec::kFp32: return "fp32";
    case PushCodec::kBf16: return "bf16";
    case PushCodec::kNaive: return "naive";
    case PushCodec::kEf: return "ef";
    case PushCodec::kLoco: return "loco";
  }
  return "?";
}

bool IsKnownPushCodec(PushCodec codec) { return std::string_view(PushCodecName(codec)) != "?"; }

bool IsBlockCodec(PushCodec codec) {
  return codec == PushCodec::kNaive || codec == PushCodec::kEf || codec == PushCodec::kLoco;
}

}  // namespace loco

// PushCodec: how a worker encodes the gradient it pushes (WorkerOptions::
// codec). fp32 and bf16 send every element; naive, ef and loco are the block
// codecs: CODEC_BLOCK_QUANT payloads from cpu::LocoCompress in mode kNaive,
// kEf or kLoco (no compensation, classic error feedback, LoCo).
//
// The names are what flags and logs use; ParsePushCodec is the one place a
// name becomes a codec, so a bad name is refused once, at the edge.
#pragma once

#include <string_view>

#include "common/status.h"

namespace loco {

enum class PushCodec { kFp32, kBf16, kNaive, kEf, kLoco };

// The valid names, for help texts and error messages: "fp32|bf16|naive|ef|loco".
inline constexpr std::string_view kPushCodecChoices = "fp32|bf16|naive|ef|loco";

// "fp32" -> kFp32, ...; InvalidArgument naming the valid choices otherwise.
[[nodiscard]] StatusOr<PushCodec> ParsePushCodec(std::string_view name);
// The name ParsePushCodec accepts for `codec`; "?" for a value outside the
// enum (a cast from an integer).
const char* PushCodecName(PushCodec codec);
// Whether `codec` is one of the enum's values.
bool IsKnownPushCodec(PushCodec codec);
// naive, ef or loco: quantized in blocks of WorkerOptions::block_size.
bool IsBlockCodec(PushCodec codec);

}  // namespace loco

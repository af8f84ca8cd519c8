// PayloadBytes: the exact bytes one payload of a shard carries on the wire
// (its data and its scales, not gRPC's framing), by codec. The same
// arithmetic as rpc/payload_bytes.h, from the kernels' own block and
// packing rules, so that the planner's wire bytes are computed, not fitted.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace loco::plan {

enum class WireCodec { kFp32, kBf16, kBlockQuant };

// One direction's encoding: fp32, bf16, or block-quantised codes of `bits`
// with one fp32 scale per `block_size` elements (LoCo pushes and the
// server's delta return both travel as block-quantised payloads).
struct WireEncoding {
  WireCodec codec = WireCodec::kBlockQuant;
  int bits = 4;
  int block_size = 256;
};

// bits in {2, 4, 8} and a block size that is a multiple of 32 in [32, 4096]
// for kBlockQuant (the kernels' rule); `what` names the flags in messages.
Status ValidateEncoding(const WireEncoding& encoding, const std::string& what);

// Data bytes plus scale bytes of one payload of `elements` elements.
// Precondition: ValidateEncoding(encoding) is OK.
uint64_t PayloadBytes(const WireEncoding& encoding, uint64_t elements);

// "loco4/b256", "bf16", "fp32": for reports.
std::string EncodingName(const WireEncoding& encoding);

}  // namespace loco::plan

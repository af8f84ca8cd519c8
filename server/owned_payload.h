// OwnedPayload: a payload received over the wire, checked against the range
// it claims to cover and copied into aligned buffers the kernels can read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/decode_accumulate.h"
#include "proto/loco.pb.h"
#include "server/shard_layout.h"

namespace loco {

struct OwnedPayload {
  PayloadCodec codec = PayloadCodec::kFp32;
  int bits = 4;          // meaningful for kBlockQuant only
  int block_size = 128;  // meaningful for kBlockQuant only
  std::string data;
  std::vector<float> scales;  // kBlockQuant only

  // Checks, in order: offset/length equal `range`; codec known; for block
  // quantization bits in {2,4,8} and block size a multiple of 32 in
  // [32, 4096]; data (and scale) byte counts exactly what the length needs;
  // fp32/bf16 carry no scales; scales finite and >= 0; fp32/bf16 values
  // finite. Every failure is InvalidArgument naming the field, the value and
  // what would be valid.
  static StatusOr<OwnedPayload> FromProto(const v1::Payload& wire, ShardRange range);

  // A view over this payload's buffers (valid while *this lives, unmoved).
  PayloadView view() const;
};

}  // namespace loco

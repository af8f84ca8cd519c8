// OwnedPayload: a payload received over the wire, checked against the range
// it claims to cover and copied into aligned buffers the kernels can read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/decode_accumulate.h"
#include "proto/loco.pb.h"
#include "common/shard_layout.h"

namespace loco {

// The largest gradient magnitude a push may carry, after decoding. AdamW
// squares the gradient in fp32 (v = beta2*v + (1-beta2)*g*g): above about
// 1.8e19 the square is +Inf, v stays Inf and the element never moves again;
// and the mean sums one such value per worker in fp32. 1e18 keeps g*g (1e36)
// and any mean of such values two orders of magnitude below FLT_MAX (3.4e38),
// while real gradients are many orders of magnitude smaller.
inline constexpr double kMaxAbsGradient = 1e18;

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
  // The same checks; on success the data bytes move out of `wire` instead of
  // being copied (a refused `wire` keeps them).
  static StatusOr<OwnedPayload> FromProto(v1::Payload&& wire, ShardRange range);
  // The same checks, without copying the data: for a caller that reads the
  // values straight out of `wire` once they are known to be valid.
  [[nodiscard]] static Status Check(const v1::Payload& wire, ShardRange range);

  // For gradients (not parameters): every decoded value is at most
  // kMaxAbsGradient in magnitude. For block quantization that is a bound on
  // the scales, scale * 2^(bits-1) <= kMaxAbsGradient (|code| <= 2^(bits-1)
  // for any bit pattern, so the check needs no decoding). InvalidArgument
  // naming the first offending scale or element. Precondition: FromProto
  // produced *this.
  Status CheckGradientMagnitude() const;

  // A view over this payload's buffers (valid while *this lives, unmoved).
  PayloadView view() const;

 private:
  enum class DataHandling { kCopy, kTake, kLeave };
  // FromProto and Check; kTake moves the data out of `take_data` (wire's
  // own), kLeave leaves the result's data empty.
  static StatusOr<OwnedPayload> Build(const v1::Payload& wire, ShardRange range,
                                      DataHandling handling, std::string* take_data);
};

}  // namespace loco

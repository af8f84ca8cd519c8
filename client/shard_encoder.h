// ShardEncoder: turns one shard's slice of the gradient into the Payload a
// worker pushes, and owns that shard's LoCo error state. The Worker holds one
// per shard and does not know where the gradient lives:
//   GradientEncoder (client/gradient_encoder.h): the slice in host memory;
//   DeviceGradientEncoder (client/device_gradient_encoder.h): the slice in
//     CUDA device memory, compressed on the device.
// Both produce the same payload bytes for the same gradient (nearest
// rounding), and share the error-state contract:
//
// The error state is updated in place by Encode. Commit confirms the update
// once the server accepted the push. A push that was never accepted must not
// leave its compensation in the state, and the state before it is gone: the
// next Encode after an unconfirmed one, or Discard, restarts the state from
// zero, as a LoCo reset (reset_period) does.
//
// Not thread-safe; one encoder per shard, used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "common/status.h"
#include "proto/loco.pb.h"

namespace loco {

struct EncodeStats {
  uint64_t nonfinite = 0;
  double error_sq_norm = 0;  // Σ ê'^2 of the new error state (block codecs)
  // Σ g^2 of the slice, when the encoder computes it: the block codecs in
  // their compression pass (finite elements only, ~1e-5 relative), a device
  // encoder because the host cannot read the gradient (every element counts,
  // so a non-finite one makes it non-finite). Unset: the caller computes the
  // norm itself.
  std::optional<double> grad_sq_norm;
};

class ShardEncoder {
 public:
  virtual ~ShardEncoder() = default;
  // grads: the shard's slice (length elements, in the memory the encoder
  // reads). Fills *out (codec, bits, block_size, offset, length, data,
  // scales) for step `step` (0-based: drives the reset period and the
  // stochastic-rounding seed). *out may be reused from an earlier call.
  [[nodiscard]] virtual Status Encode(std::span<const float> grads, int64_t step,
                                      v1::Payload* out, EncodeStats* stats) = 0;
  // Encoding in parts, for a gradient whose end is final before its
  // beginning (a backward pass). Zero: this encoder encodes whole slices
  // only. Otherwise BeginEncode(step, out) sets every field of *out and
  // sizes its data and scales for step `step`, and EncodeRange(grads,
  // begin, end, out, stats) encodes elements [begin, end) of the slice
  // into their place in *out; `begin` and `end` are multiples of
  // part_alignment() (or `end` is the length). Once every element has been
  // encoded exactly once, in any order of ranges, *out and the error state
  // are what Encode would have made, and the stats of the calls add up to
  // its stats. Commit and Discard apply to the whole payload.
  virtual size_t part_alignment() const { return 0; }
  [[nodiscard]] virtual Status BeginEncode(int64_t step, v1::Payload* out) {
    return Unimplemented("this encoder encodes whole slices only");
  }
  [[nodiscard]] virtual Status EncodeRange(std::span<const float> grads, size_t begin,
                                           size_t end, v1::Payload* out, EncodeStats* stats) {
    return Unimplemented("this encoder encodes whole slices only");
  }
  // The server accepted the payload of the last Encode.
  virtual void Commit() = 0;
  // The payload of the last Encode was not accepted: the error state
  // restarts from zero (no-op after Commit).
  virtual void Discard() = 0;
  // Bytes kept between steps for the error state (0 for fp32, bf16, naive).
  virtual size_t state_bytes() const = 0;
  // Serialized payload bytes of one push (data + scales) for this codec.
  virtual size_t WireBytes() const = 0;
};

}  // namespace loco

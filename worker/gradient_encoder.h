// GradientEncoder: turns one shard's slice of the gradient into the Payload a
// worker pushes, and owns that shard's LoCo error state.
//
// Codecs: fp32 (raw), bf16 (round to nearest even), naive/ef/loco
// (CODEC_BLOCK_QUANT via cpu::LocoCompress in mode kNaive/kEf/kLoco).
// Non-finite gradient elements never reach the wire: they are counted and
// sent as 0 (the block codecs' kernel does this itself; fp32/bf16 here).
//
// The error state is updated in place by Encode: one copy, 1 byte per
// element plus 4 per block (the LoCo state a worker holds beyond its model),
// instead of a second scratch copy kept for an undo. Commit confirms the
// update once the server accepted the push. A push that was never accepted
// (refused, or failed for good) must not leave its compensation in the
// state, and the state before it is gone: the next Encode after an
// unconfirmed one, or Discard, restarts the state from zero, as a LoCo reset
// (reset_period) does. Refusals are rare (a resync after a membership
// change), so the cost in compensation is one step's.
//
// Not thread-safe; one encoder per shard, used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"
#include "kernels/loco_compress.h"
#include "proto/loco.pb.h"
#include "worker/worker_options.h"

namespace loco {

struct EncodeStats {
  uint64_t nonfinite = 0;
  double error_sq_norm = 0;  // Σ ê'^2 of the new error state (block codecs)
};

class GradientEncoder {
 public:
  // `offset`/`length`: the shard's range in the flat vector; `offset` must be
  // a multiple of options.block_size (checked by the worker at Join).
  GradientEncoder(const WorkerOptions& options, uint64_t worker_id, uint64_t offset,
                  size_t length);

  // grads.size() == length. Fills *out (codec, bits, block_size, offset,
  // length, data, scales) for step `step` (0-based, drives the reset period
  // and the stochastic-rounding seed).
  Status Encode(std::span<const float> grads, int64_t step, v1::Payload* out,
                EncodeStats* stats);
  // The server accepted the payload of the last Encode.
  void Commit();
  // The payload of the last Encode was not accepted: the error state
  // restarts from zero (no-op after Commit).
  void Discard();
  // Bytes this encoder keeps between steps: the error state (0 for fp32,
  // bf16 and naive). The payload it fills is the caller's.
  size_t state_bytes() const { return state_.bytes(); }

  // Serialized payload bytes of one push (data + scales) for this codec.
  size_t WireBytes() const;
  const ErrorState& error_state() const { return state_; }

 private:
  WorkerOptions options_;
  uint64_t worker_id_;
  uint64_t offset_;
  size_t length_;
  bool block_codec_;
  LocoParams params_;
  ErrorState state_;
  bool pending_ = false;  // an Encode not yet confirmed by Commit
};

}  // namespace loco

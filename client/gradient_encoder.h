// GradientEncoder: the ShardEncoder (client/shard_encoder.h) for a gradient
// in host memory.
//
// Codecs: fp32 (raw), bf16 (round to nearest even), naive/ef/loco
// (CODEC_BLOCK_QUANT via cpu::LocoCompress in mode kNaive/kEf/kLoco).
// Non-finite gradient elements never reach the wire: they are counted and
// sent as 0 (the block codecs' kernel does this itself; fp32/bf16 here).
//
// The error state is one copy, updated in place: 1 byte per element plus 4
// per block (the LoCo state a worker holds beyond its model), instead of a
// second scratch copy kept for an undo. Refusals are rare (a resync after a
// membership change), so restarting the state from zero after one costs one
// step's compensation.
//
// Not thread-safe; one encoder per shard, used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"
#include "kernels/loco_compress.h"
#include "proto/loco.pb.h"
#include "client/shard_encoder.h"
#include "client/worker_options.h"

namespace loco {

// What every encoder derives from the options, whatever the memory: the
// LoCo parameters of the shard at `offset` (seed 0), and the
// stochastic-rounding seed of one worker's step (fresh per worker and step,
// so that they do not share rounding decisions). Whether the codec is a block
// codec: IsBlockCodec (client/push_codec.h).
LocoParams BlockCodecParams(const WorkerOptions& options, uint64_t offset);
uint64_t StepRoundingSeed(uint64_t seed, uint64_t worker_id, int64_t step);
// Serialized payload bytes (data + scales) of one push of `length` elements.
size_t PayloadWireBytes(const WorkerOptions& options, size_t length);

class GradientEncoder final : public ShardEncoder {
 public:
  // `offset`/`length`: the shard's range in the flat vector; `offset` must be
  // a multiple of options.block_size (checked by the worker at Join).
  GradientEncoder(const WorkerOptions& options, uint64_t worker_id, uint64_t offset,
                  size_t length);

  // grads: host memory, grads.size() == length.
  Status Encode(std::span<const float> grads, int64_t step, v1::Payload* out,
                EncodeStats* stats) override;
  // Every codec encodes in parts: a block (block codecs) or an element.
  size_t part_alignment() const override;
  Status BeginEncode(int64_t step, v1::Payload* out) override;
  // grads: the whole slice (length elements); only [begin, end) is read.
  Status EncodeRange(std::span<const float> grads, size_t begin, size_t end, v1::Payload* out,
                     EncodeStats* stats) override;
  void Commit() override;
  void Discard() override;
  size_t state_bytes() const override { return state_.bytes(); }
  size_t WireBytes() const override;
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
  LocoParams step_params_;  // the block codecs' parameters of the step begun
  int64_t step_ = 0;        // the step begun
};

}  // namespace loco

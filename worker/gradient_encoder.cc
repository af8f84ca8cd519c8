#include "worker/gradient_encoder.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cast.h"
#include "kernels/quantize.h"

namespace loco {
namespace {

// The wire format is little-endian; raw copies are only correct on such hosts.
static_assert(std::endian::native == std::endian::little, "LoCo-PS needs a little-endian host");

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Copies grads into *out with every non-finite element replaced by 0.
uint64_t SanitizeInto(std::span<const float> grads, float* out) {
  uint64_t bad = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    float x = grads[i];
    if (!std::isfinite(x)) {
      x = 0.0f;
      ++bad;
    }
    out[i] = x;
  }
  return bad;
}

}  // namespace

bool IsBlockCodec(const std::string& codec) {
  return codec == "naive" || codec == "ef" || codec == "loco";
}

LocoParams BlockCodecParams(const WorkerOptions& options, uint64_t offset) {
  LocoParams p;
  p.mode = options.codec == "naive" ? CompensationMode::kNaive
           : options.codec == "ef"  ? CompensationMode::kEf
                                    : CompensationMode::kLoco;
  p.bits = options.bits;
  p.block_size = options.block_size;
  p.beta = options.beta;
  p.reset_period = options.reset_period;
  p.rounding = options.stochastic_rounding ? Rounding::kStochastic : Rounding::kNearest;
  p.index_offset = offset;
  p.error_bits = options.error_bits;
  return p;
}

uint64_t StepRoundingSeed(uint64_t seed, uint64_t worker_id, int64_t step) {
  return SplitMix64(seed ^ SplitMix64(worker_id ^ SplitMix64(static_cast<uint64_t>(step))));
}

GradientEncoder::GradientEncoder(const WorkerOptions& options, uint64_t worker_id,
                                 uint64_t offset, size_t length)
    : options_(options),
      worker_id_(worker_id),
      offset_(offset),
      length_(length),
      block_codec_(IsBlockCodec(options.codec)),
      params_(BlockCodecParams(options, offset)) {
  if (block_codec_ && params_.mode != CompensationMode::kNaive) {
    state_ = ErrorState(length, options.block_size, options.error_bits);
  }
}

size_t PayloadWireBytes(const WorkerOptions& options, size_t length) {
  if (options.codec == "fp32") return 4 * length;
  if (options.codec == "bf16") return 2 * length;
  return PackedBytes(length, options.bits) + 4 * NumBlocks(length, options.block_size);
}

size_t GradientEncoder::WireBytes() const { return PayloadWireBytes(options_, length_); }

Status GradientEncoder::Encode(std::span<const float> grads, int64_t step, v1::Payload* out,
                               EncodeStats* stats) {
  if (grads.size() != length_) {
    return InvalidArgument("gradient slice has " + std::to_string(grads.size()) +
                           " elements; the shard at offset " + std::to_string(offset_) +
                           " holds " + std::to_string(length_));
  }
  *stats = EncodeStats{};
  // No Clear(): `out` is reused step after step (the worker keeps one per
  // shard), and resizing its data to the size it already has neither
  // reallocates nor zero-fills. Every field is set below.
  out->set_offset(offset_);
  out->set_length(length_);
  std::string* data = out->mutable_data();
  if (options_.codec == "fp32" || options_.codec == "bf16") {
    const bool fp32 = options_.codec == "fp32";
    out->set_codec(fp32 ? v1::CODEC_FP32 : v1::CODEC_BF16);
    out->clear_bits();
    out->clear_block_size();
    out->clear_scales();
    data->resize((fp32 ? 4 : 2) * length_);
    // A std::string's buffer is aligned for float: fp32 is sanitised in
    // place; bf16 goes through a small buffer, a chunk at a time.
    if (fp32) {
      stats->nonfinite = SanitizeInto(grads, reinterpret_cast<float*>(data->data()));
      return Status::Ok();
    }
    constexpr size_t kChunk = 16384;
    std::vector<float> clean(std::min(length_, kChunk));
    auto* half = reinterpret_cast<uint16_t*>(data->data());
    for (size_t start = 0; start < length_; start += kChunk) {
      const size_t len = std::min(kChunk, length_ - start);
      stats->nonfinite += SanitizeInto(grads.subspan(start, len), clean.data());
      cpu::CastFp32ToBf16(clean.data(), len, half + start);
    }
    return Status::Ok();
  }
  out->set_codec(v1::CODEC_BLOCK_QUANT);
  out->set_bits(static_cast<uint32_t>(options_.bits));
  out->set_block_size(static_cast<uint32_t>(options_.block_size));
  data->resize(PackedBytes(length_, options_.bits));
  // Scales are written straight into the payload (its buffer is aligned).
  std::string* scale_bytes = out->mutable_scales();
  scale_bytes->resize(NumBlocks(length_, options_.block_size) * sizeof(float));
  LocoParams p = params_;
  p.seed = StepRoundingSeed(options_.seed, worker_id_, step);
  Discard();  // an earlier Encode that was never confirmed
  ErrorStateView view{};
  if (p.mode != CompensationMode::kNaive) view = state_.view();
  LocoStats ls;
  LOCO_RETURN_IF_ERROR(cpu::LocoCompress(grads.data(), length_, step, p, view,
                                         reinterpret_cast<uint8_t*>(data->data()),
                                         reinterpret_cast<float*>(scale_bytes->data()), &ls));
  stats->nonfinite = ls.nonfinite;
  stats->error_sq_norm = ls.error_sq_norm;
  pending_ = p.mode != CompensationMode::kNaive;
  return Status::Ok();
}

void GradientEncoder::Commit() { pending_ = false; }

void GradientEncoder::Discard() {
  if (!pending_) return;
  state_.Reset();
  pending_ = false;
}

}  // namespace loco

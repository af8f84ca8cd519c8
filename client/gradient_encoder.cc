#include "client/gradient_encoder.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
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

LocoParams BlockCodecParams(const WorkerOptions& options, uint64_t offset) {
  LocoParams p;
  p.mode = options.codec == PushCodec::kNaive ? CompensationMode::kNaive
           : options.codec == PushCodec::kEf  ? CompensationMode::kEf
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
  if (options.codec == PushCodec::kFp32) return 4 * length;
  if (options.codec == PushCodec::kBf16) return 2 * length;
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
  LOCO_RETURN_IF_ERROR(BeginEncode(step, out));
  return EncodeRange(grads, 0, length_, out, stats);
}

size_t GradientEncoder::part_alignment() const {
  return block_codec_ ? static_cast<size_t>(options_.block_size) : 1;
}

Status GradientEncoder::BeginEncode(int64_t step, v1::Payload* out) {
  // No Clear(): `out` is reused step after step (the worker keeps one per
  // shard), and resizing its data to the size it already has neither
  // reallocates nor zero-fills. Every field is set below.
  out->set_offset(offset_);
  out->set_length(length_);
  std::string* data = out->mutable_data();
  if (!block_codec_) {
    const bool fp32 = options_.codec == PushCodec::kFp32;
    out->set_codec(fp32 ? v1::CODEC_FP32 : v1::CODEC_BF16);
    out->clear_bits();
    out->clear_block_size();
    out->clear_scales();
    data->resize((fp32 ? 4 : 2) * length_);
    return Status::Ok();
  }
  out->set_codec(v1::CODEC_BLOCK_QUANT);
  out->set_bits(static_cast<uint32_t>(options_.bits));
  out->set_block_size(static_cast<uint32_t>(options_.block_size));
  data->resize(PackedBytes(length_, options_.bits));
  // Scales are written straight into the payload (its buffer is aligned).
  out->mutable_scales()->resize(NumBlocks(length_, options_.block_size) * sizeof(float));
  step_params_ = params_;
  step_params_.seed = StepRoundingSeed(options_.seed, worker_id_, step);
  Discard();  // an earlier Encode that was never confirmed
  pending_ = step_params_.mode != CompensationMode::kNaive;
  step_ = step;
  return Status::Ok();
}

Status GradientEncoder::EncodeRange(std::span<const float> grads, size_t begin, size_t end,
                                    v1::Payload* out, EncodeStats* stats) {
  const size_t align = part_alignment();
  if (grads.size() != length_ || begin > end || end > length_ || begin % align != 0 ||
      (end % align != 0 && end != length_)) {
    return InvalidArgument("EncodeRange: [" + std::to_string(begin) + ", " +
                           std::to_string(end) + ") of a slice of " +
                           std::to_string(grads.size()) + " elements; expected a range of " +
                           "the shard's " + std::to_string(length_) + " aligned to " +
                           std::to_string(align));
  }
  const size_t len = end - begin;
  char* data = out->mutable_data()->data();
  if (!block_codec_) {
    // A std::string's buffer is aligned for float: fp32 is sanitised in
    // place; bf16 goes through a small buffer, a chunk at a time.
    if (options_.codec == PushCodec::kFp32) {
      stats->nonfinite +=
          SanitizeInto(grads.subspan(begin, len), reinterpret_cast<float*>(data) + begin);
      return Status::Ok();
    }
    constexpr size_t kChunk = 16384;
    std::vector<float> clean(std::min(len, kChunk));
    auto* half = reinterpret_cast<uint16_t*>(data) + begin;
    for (size_t start = 0; start < len; start += kChunk) {
      const size_t n = std::min(kChunk, len - start);
      stats->nonfinite += SanitizeInto(grads.subspan(begin + start, n), clean.data());
      cpu::CastFp32ToBf16(clean.data(), n, half + start);
    }
    return Status::Ok();
  }
  // Blocks never straddle `begin`, so the range is a payload of its own:
  // its codes, scales and error state are those parts of the whole one's,
  // and stochastic rounding draws by the element's index in the model.
  const size_t block = static_cast<size_t>(options_.block_size);
  LocoParams p = step_params_;
  p.index_offset += begin;
  ErrorStateView view{};
  if (p.mode != CompensationMode::kNaive) {
    const ErrorStateView whole = state_.view();
    if (options_.error_bits == 32) {
      view.values = whole.values + begin;
    } else {
      view.codes = whole.codes + begin;
      view.scales = whole.scales + begin / block;
    }
  }
  LocoStats ls;
  LOCO_RETURN_IF_ERROR(cpu::LocoCompress(
      grads.data() + begin, len, step_, p, view,
      reinterpret_cast<uint8_t*>(data) + PackedBytes(begin, options_.bits),
      reinterpret_cast<float*>(out->mutable_scales()->data()) + begin / block, &ls));
  stats->nonfinite += ls.nonfinite;
  stats->error_sq_norm += ls.error_sq_norm;
  // The norm came with the compression pass: the worker need not read the
  // gradient once more for it.
  stats->grad_sq_norm = stats->grad_sq_norm.value_or(0.0) + ls.grad_sq_norm;
  return Status::Ok();
}

void GradientEncoder::Commit() { pending_ = false; }

void GradientEncoder::Discard() {
  if (!pending_) return;
  state_.Reset();
  pending_ = false;
}

}  // namespace loco

#include "server/return_path.h"

#include <cstring>

#include "common/log.h"
#include "kernels/cast.h"
#include "kernels/quantize.h"

namespace loco {

StatusOr<PullCodec> ParsePullCodec(const std::string& name) {
  if (name == "fp32") return PullCodec::kFp32;
  if (name == "bf16") return PullCodec::kBf16;
  if (name == "delta") return PullCodec::kDelta;
  return InvalidArgument("unknown pull codec '" + name + "'; expected fp32, bf16 or delta");
}

const char* PullCodecName(PullCodec codec) {
  switch (codec) {
    case PullCodec::kFp32: return "fp32";
    case PullCodec::kBf16: return "bf16";
    case PullCodec::kDelta: return "delta";
  }
  return "?";
}

Status ReturnPath::ValidateOptions(const ReturnPathOptions& o) {
  if (o.codec != PullCodec::kDelta) return Status::Ok();
  return ValidateQuantizeParams(o.bits, o.block_size).Annotate("pull delta codec");
}

void ReturnPath::Reset(const std::vector<float>& params, uint64_t) {
  delta_version_ = 0;
  delta_codes_.clear();
  delta_scales_.clear();
  if (options_.codec == PullCodec::kDelta) {
    replica_ = params;
  } else {
    replica_.clear();
  }
}

void ReturnPath::Restore(const std::vector<float>& params, std::vector<float> replica) {
  Reset(params, 0);
  if (options_.codec == PullCodec::kDelta && replica.size() == params.size()) {
    replica_ = std::move(replica);
  }
  full_sync_next_ = true;
}

Status ReturnPath::OnApplied(const std::vector<float>& params, uint64_t version) {
  if (options_.codec != PullCodec::kDelta) return Status::Ok();
  delta_version_ = 0;
  const bool forced = full_sync_next_;
  full_sync_next_ = false;
  if (forced || replica_.size() != params.size() ||
      (options_.full_sync_every > 0 && version % options_.full_sync_every == 0)) {
    replica_ = params;
    return Status::Ok();
  }
  const size_t n = params.size();
  std::vector<float> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = params[i] - replica_[i];
  QuantizeParams q;
  q.bits = options_.bits;
  q.block_size = options_.block_size;
  q.rounding = Rounding::kNearest;
  std::string codes(PackedBytes(n, q.bits), '\0');
  std::vector<float> scales(NumBlocks(n, q.block_size));
  QuantizeStats stats;
  Status s = cpu::Quantize(d.data(), n, q, reinterpret_cast<uint8_t*>(codes.data()),
                           scales.data(), &stats);
  if (s.ok() && stats.nonfinite > 0) {
    s = Internal(std::to_string(stats.nonfinite) + " non-finite parameter deltas");
  }
  std::vector<float> decoded(n);
  if (s.ok()) {
    s = cpu::Dequantize(reinterpret_cast<const uint8_t*>(codes.data()), scales.data(), n, q.bits,
                        q.block_size, decoded.data());
  }
  if (!s.ok()) {
    // Fall back to a full sync for this version: correct, only larger.
    replica_ = params;
    return s.Annotate("delta for version " + std::to_string(version));
  }
  for (size_t i = 0; i < n; ++i) replica_[i] += decoded[i];
  delta_codes_ = std::move(codes);
  delta_scales_ = std::move(scales);
  delta_version_ = version;
  return Status::Ok();
}

void ReturnPath::EncodeFp32(const std::vector<float>& values, ShardRange range,
                            v1::Payload* out) {
  out->set_codec(v1::CODEC_FP32);
  out->set_offset(range.offset);
  out->set_length(range.length);
  out->set_data(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

void ReturnPath::Encode(const v1::PullRequest& request, const std::vector<float>& params,
                        uint64_t version, ShardRange range, v1::PullResponse* out) const {
  out->set_version(version);
  out->set_is_delta(false);
  v1::Payload* p = out->mutable_params();
  const bool forced_full = request.want_full() || !request.have_any();
  switch (options_.codec) {
    case PullCodec::kFp32:
      EncodeFp32(params, range, p);
      return;
    case PullCodec::kBf16: {
      if (forced_full) {
        EncodeFp32(params, range, p);
        return;
      }
      std::string bf(params.size() * 2, '\0');
      cpu::CastFp32ToBf16(params.data(), params.size(), reinterpret_cast<uint16_t*>(bf.data()));
      p->set_codec(v1::CODEC_BF16);
      p->set_offset(range.offset);
      p->set_length(range.length);
      p->set_data(std::move(bf));
      return;
    }
    case PullCodec::kDelta: {
      const bool delta_ok = !forced_full && version > 0 && delta_version_ == version &&
                            request.have_version() + 1 == version;
      if (!delta_ok) {
        EncodeFp32(replica_.size() == params.size() ? replica_ : params, range, p);
        return;
      }
      out->set_is_delta(true);
      p->set_codec(v1::CODEC_BLOCK_QUANT);
      p->set_bits(static_cast<uint32_t>(options_.bits));
      p->set_block_size(static_cast<uint32_t>(options_.block_size));
      p->set_offset(range.offset);
      p->set_length(range.length);
      p->set_scales(reinterpret_cast<const char*>(delta_scales_.data()),
                    delta_scales_.size() * sizeof(float));
      p->set_data(delta_codes_);
      return;
    }
  }
}

}  // namespace loco

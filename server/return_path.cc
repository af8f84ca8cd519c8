#include "server/return_path.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/log.h"
#include "common/parallel_for.h"
#include "kernels/cast.h"
#include "kernels/quantize.h"

namespace loco {
namespace {

// Elements per chunk of the delta's encoding (rounded down to whole blocks).
constexpr size_t kDeltaChunk = 64 * 1024;

}  // namespace

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

std::shared_ptr<const std::string> ReturnPath::Bf16Body(const std::vector<float>& params,
                                                        uint64_t version) {
  if (!bf16_ || bf16_version_ != version) {
    // A new buffer every time: pulls still sending the previous one hold it.
    auto bf = std::make_shared<std::string>();
    bf->resize(params.size() * 2);
    cpu::CastFp32ToBf16(params.data(), params.size(), reinterpret_cast<uint16_t*>(bf->data()));
    bf16_ = std::move(bf);
    bf16_version_ = version;
  }
  return bf16_;
}

void ReturnPath::OnApplying() {
  ReleaseRemakeableBodies();
  delta_version_ = 0;
  delta_codes_.reset();
  delta_scales_.reset();
}

void ReturnPath::ReleaseRemakeableBodies() {
  fp32_.reset();
  bf16_.reset();
}

void ReturnPath::Reset(const std::vector<float>& params, uint64_t) {
  OnApplying();
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
  OnApplying();  // when the owner did not
  if (options_.codec != PullCodec::kDelta) return Status::Ok();
  const bool forced = full_sync_next_;
  full_sync_next_ = false;
  if (forced || replica_.size() != params.size() ||
      (options_.full_sync_every > 0 && version % options_.full_sync_every == 0)) {
    replica_ = params;
    return Status::Ok();
  }
  const size_t n = params.size();
  QuantizeParams q;
  q.bits = options_.bits;
  q.block_size = options_.block_size;
  q.rounding = Rounding::kNearest;
  // New buffers: pulls still sending the previous delta hold the old ones.
  auto codes = std::make_shared<std::string>();
  codes->resize(PackedBytes(n, q.bits));
  auto scales = std::make_shared<std::string>();
  scales->resize(NumBlocks(n, q.block_size) * sizeof(float));
  auto* code_bytes = reinterpret_cast<uint8_t*>(codes->data());
  auto* scale_values = reinterpret_cast<float*>(scales->data());
  // Chunk by chunk, so that the delta and its decoding need a chunk of
  // scratch instead of a shard's worth. A chunk is whole blocks, so the
  // codes and scales are those of one pass (blocks are independent and the
  // rounding is to nearest), and whole bytes of codes (block sizes are
  // multiples of 32, so chunk * bits is a multiple of 8).
  const size_t chunk =
      static_cast<size_t>(q.block_size) * std::max<size_t>(1, kDeltaChunk / q.block_size);
  // Chunks are independent (their own codes, scales and replica values):
  // options_.threads share them out, each thread with its own scratch.
  const size_t chunks = (n + chunk - 1) / chunk;
  const size_t workers = ParallelWorkers(chunks, options_.threads);
  scratch_.resize(workers);
  for (std::vector<float>& sc : scratch_) sc.resize(std::min(n, chunk));
  std::vector<Status> failed(workers, Status::Ok());
  ParallelFor(chunks, workers, [&](size_t c, size_t worker) {
    if (!failed[worker].ok()) return;
    float* scratch = scratch_[worker].data();
    const size_t begin = c * chunk, len = std::min(chunk, n - begin);
    for (size_t i = 0; i < len; ++i) scratch[i] = params[begin + i] - replica_[begin + i];
    uint8_t* chunk_codes = code_bytes + begin * static_cast<size_t>(q.bits) / 8;
    float* chunk_scales = scale_values + begin / static_cast<size_t>(q.block_size);
    QuantizeStats stats;
    Status cs = cpu::Quantize(scratch, len, q, chunk_codes, chunk_scales, &stats);
    if (cs.ok() && stats.nonfinite > 0) {
      cs = Internal(std::to_string(stats.nonfinite) + " non-finite parameter deltas");
    }
    // The delta is no longer needed: its decoding takes its place.
    if (cs.ok()) cs = cpu::Dequantize(chunk_codes, chunk_scales, len, q.bits, q.block_size, scratch);
    if (cs.ok()) {
      for (size_t i = 0; i < len; ++i) replica_[begin + i] += scratch[i];
    }
    failed[worker] = std::move(cs);
  });
  Status s = Status::Ok();
  for (Status& f : failed) {
    if (s.ok() && !f.ok()) s = std::move(f);
  }
  if (!s.ok()) {
    // Fall back to a full sync for this version: correct, only larger.
    replica_ = params;
    return s.Annotate("delta for version " + std::to_string(version));
  }
  delta_codes_ = std::move(codes);
  delta_scales_ = std::move(scales);
  delta_version_ = version;
  return Status::Ok();
}

std::shared_ptr<const std::string> ReturnPath::EncodeFp32(const std::vector<float>& values,
                                                          uint64_t version, ShardRange range,
                                                          v1::Payload* out) {
  out->set_codec(v1::CODEC_FP32);
  out->set_offset(range.offset);
  out->set_length(range.length);
  if (!fp32_ || fp32_version_ != version) {
    fp32_ = std::make_shared<const std::string>(reinterpret_cast<const char*>(values.data()),
                                                 values.size() * sizeof(float));
    fp32_version_ = version;
  }
  return fp32_;
}

ReturnPath::SharedBody ReturnPath::Encode(const v1::PullRequest& request,
                                          const std::vector<float>& params, uint64_t version,
                                          ShardRange range, v1::PullResponse* out) {
  out->set_version(version);
  out->set_is_delta(false);
  v1::Payload* p = out->mutable_params();
  const bool forced_full = request.want_full() || !request.have_any();
  switch (options_.codec) {
    case PullCodec::kFp32:
      return SharedBody{EncodeFp32(params, version, range, p), nullptr};
    case PullCodec::kBf16: {
      if (forced_full) return SharedBody{EncodeFp32(params, version, range, p), nullptr};
      p->set_codec(v1::CODEC_BF16);
      p->set_offset(range.offset);
      p->set_length(range.length);
      return SharedBody{Bf16Body(params, version), nullptr};
    }
    case PullCodec::kDelta: {
      const bool delta_ok = !forced_full && version > 0 && delta_version_ == version &&
                            request.have_version() + 1 == version && delta_codes_ &&
                            delta_scales_;
      if (!delta_ok) {
        const auto& full = replica_.size() == params.size() ? replica_ : params;
        return SharedBody{EncodeFp32(full, version, range, p), nullptr};
      }
      out->set_is_delta(true);
      p->set_codec(v1::CODEC_BLOCK_QUANT);
      p->set_bits(static_cast<uint32_t>(options_.bits));
      p->set_block_size(static_cast<uint32_t>(options_.block_size));
      p->set_offset(range.offset);
      p->set_length(range.length);
      return SharedBody{delta_codes_, delta_scales_};
    }
  }
  return SharedBody{EncodeFp32(params, version, range, p), nullptr};  // unreachable
}

void ReturnPath::Attach(const SharedBody& body, v1::PullResponse* out) {
  v1::Payload* p = out->mutable_params();
  if (body.data) p->set_data(*body.data);
  if (body.scales) p->set_scales(*body.scales);
}

}  // namespace loco

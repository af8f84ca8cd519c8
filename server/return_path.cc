#include "server/return_path.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "common/log.h"
#include "common/parallel_for.h"
#include "kernels/cast.h"
#include "kernels/quantize.h"
#include "server/give_back_on_release.h"

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
    // The previous version's buffer when no pull holds it any more.
    std::shared_ptr<std::string> bf = spares_->Make(AnswerSpares::Kind::kBf16, params.size() * 2);
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

ReturnPath::AnswerBuffers ReturnPath::BeginAnswer(size_t n, uint64_t version) {
  pending_data_.reset();
  pending_scales_.reset();
  if (options_.codec == PullCodec::kBf16) {
    // The previous version's buffer when no pull holds it any more; every
    // byte is written (EncodeAnswerRange over the whole shard) before the
    // answer is served.
    pending_data_ = spares_->Make(AnswerSpares::Kind::kBf16, n * sizeof(uint16_t));
    return AnswerBuffers{pending_data_, nullptr};
  }
  if (options_.codec != PullCodec::kDelta) return {};
  const bool forced = full_sync_next_;
  full_sync_next_ = false;
  if (forced || replica_.size() != n ||
      (options_.full_sync_every > 0 && version % options_.full_sync_every == 0)) {
    return {};
  }
  // The previous delta's buffers when no pull holds them any more (else
  // new ones); the packing writes every byte of the codes (PackedBytes),
  // and every scale, before the answer is served.
  pending_data_ = spares_->Make(AnswerSpares::Kind::kCodes, PackedBytes(n, options_.bits));
  pending_scales_ = spares_->Make(AnswerSpares::Kind::kScales,
                                  NumBlocks(n, options_.block_size) * sizeof(float));
  return AnswerBuffers{pending_data_, pending_scales_};
}

Status ReturnPath::EncodeAnswerRange(const float* params, size_t begin, size_t count) {
  if (options_.codec == PullCodec::kBf16) {
    // The same rounding as Bf16Body, element by element: the same bytes.
    cpu::CastFp32ToBf16(params + begin, count,
                        reinterpret_cast<uint16_t*>(pending_data_->data()) + begin);
    return Status::Ok();
  }
  const int bits = options_.bits, block = options_.block_size;
  // A range is whole blocks, so its codes and scales are those of one pass
  // over the shard (blocks are independent and the rounding is to
  // nearest), and whole bytes of codes (block sizes are multiples of 32).
  auto* codes = reinterpret_cast<uint8_t*>(pending_data_->data()) +
                begin * static_cast<size_t>(bits) / 8;
  float* scales = reinterpret_cast<float*>(pending_scales_->data()) +
                  begin / static_cast<size_t>(block);
  // D = Q(params - W), then W += D(payload) as a worker applies it, in one
  // pass (the same bits as Quantize and DequantizeAdd one after the other).
  QuantizeStats stats;
  LOCO_RETURN_IF_ERROR(cpu::QuantizeDeltaAdd(params + begin, replica_.data() + begin, count,
                                             bits, block, codes, scales, &stats));
  if (stats.nonfinite > 0) {
    // The answer is cancelled and the replica reset (FinishAnswer).
    return Internal(std::to_string(stats.nonfinite) + " non-finite parameter deltas");
  }
  return Status::Ok();
}

Status ReturnPath::FinishAnswer(const std::vector<float>& params, uint64_t version,
                                Status encoded) {
  std::shared_ptr<std::string> data = std::move(pending_data_);
  std::shared_ptr<std::string> scales = std::move(pending_scales_);
  if (options_.codec == PullCodec::kBf16) {
    if (data && encoded.ok() && data->size() == params.size() * sizeof(uint16_t)) {
      bf16_ = std::move(data);
      bf16_version_ = version;
    }
    return encoded.ok() ? Status::Ok()
                        : encoded.Annotate("bf16 copy for version " + std::to_string(version));
  }
  if (options_.codec != PullCodec::kDelta) return Status::Ok();
  if (!data || !encoded.ok()) {
    replica_ = params;
    return encoded.ok() ? Status::Ok()
                        : encoded.Annotate("delta for version " + std::to_string(version));
  }
  delta_codes_ = std::move(data);
  delta_scales_ = std::move(scales);
  delta_version_ = version;
  return Status::Ok();
}

void ReturnPath::CancelAnswer() {
  pending_data_.reset();
  pending_scales_.reset();
  full_sync_next_ = true;
}

Status ReturnPath::OnApplied(const std::vector<float>& params, uint64_t version) {
  OnApplying();  // when the owner did not
  const size_t n = params.size();
  const AnswerBuffers buffers = BeginAnswer(n, version);
  if (!buffers.data) return FinishAnswer(params, version, Status::Ok());
  // Chunk by chunk: chunks are independent, so options_.threads share
  // them out.
  const size_t block = answer_block();
  const size_t chunk = block * std::max<size_t>(1, kDeltaChunk / block);
  const size_t chunks = (n + chunk - 1) / chunk;
  const size_t workers = ParallelWorkers(chunks, options_.threads);
  std::vector<Status> failed(workers, Status::Ok());
  ParallelFor(chunks, workers, [&](size_t c, size_t worker) {
    if (!failed[worker].ok()) return;
    const size_t begin = c * chunk, len = std::min(chunk, n - begin);
    failed[worker] = EncodeAnswerRange(params.data(), begin, len);
  });
  Status s = Status::Ok();
  for (Status& f : failed) {
    if (s.ok() && !f.ok()) s = std::move(f);
  }
  return FinishAnswer(params, version, std::move(s));
}

std::shared_ptr<const std::string> ReturnPath::EncodeFp32(const std::vector<float>& values,
                                                          uint64_t version, ShardRange range,
                                                          v1::Payload* out) {
  out->set_codec(v1::CODEC_FP32);
  out->set_offset(range.offset);
  out->set_length(range.length);
  if (!fp32_ || fp32_version_ != version) {
    const size_t bytes = values.size() * sizeof(float);
    std::shared_ptr<PayloadBuffers> buffers = buffers_.lock();
    std::string body = buffers ? buffers->Take(bytes) : std::string();
    body.assign(reinterpret_cast<const char*>(values.data()), bytes);
    // The last pull to send the body gives its buffer back.
    fp32_ = GiveBackOnRelease(std::move(body), buffers_, [](PayloadBuffers& to, std::string&& b) {
      to.Give(std::move(b));
    });
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
      AnswerHeader(version, range, out);  // the header the answer in parts has
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
      AnswerHeader(version, range, out);
      return SharedBody{delta_codes_, delta_scales_};
    }
  }
  return SharedBody{EncodeFp32(params, version, range, p), nullptr};  // unreachable
}

void ReturnPath::AnswerHeader(uint64_t version, ShardRange range, v1::PullResponse* out) const {
  out->set_version(version);
  v1::Payload* p = out->mutable_params();
  p->set_offset(range.offset);
  p->set_length(range.length);
  if (options_.codec == PullCodec::kBf16) {
    out->set_is_delta(false);
    p->set_codec(v1::CODEC_BF16);
    return;
  }
  out->set_is_delta(true);
  p->set_codec(v1::CODEC_BLOCK_QUANT);
  p->set_bits(static_cast<uint32_t>(options_.bits));
  p->set_block_size(static_cast<uint32_t>(options_.block_size));
}

void ReturnPath::Attach(const SharedBody& body, v1::PullResponse* out) {
  v1::Payload* p = out->mutable_params();
  if (body.data) p->set_data(*body.data);
  if (body.scales) p->set_scales(*body.scales);
}

}  // namespace loco

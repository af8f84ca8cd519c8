#include "worker/pulled_parts.h"

#include <cstring>

#include "kernels/quantize.h"

namespace loco {
namespace {

std::string Num(uint64_t x) { return std::to_string(x); }

}  // namespace

void PulledParts::Reset(uint64_t max_length) {
  max_length_ = max_length;
  chunks_ = 0;
  header_.Clear();
  data_.clear();
  scales_.clear();
  data_placed_.Clear();
  scales_placed_.Clear();
  data_span_ = {};
}

Status PulledParts::Add(const v1::PullChunk& chunk) {
  const std::string where = "pull chunk " + Num(chunks_);
  if (chunks_ == 0) {
    if (!chunk.has_header()) {
      return InvalidArgument(where + " has no header; the first chunk must carry the answer's "
                             "PullResponse");
    }
    const v1::Payload& p = chunk.header().params();
    if (!p.data().empty() || !p.scales().empty()) {
      return InvalidArgument(where + "'s header carries data or scales; they belong in the "
                             "chunks' fields");
    }
    if (p.length() == 0 || p.length() > max_length_) {
      return InvalidArgument(where + "'s header has length " + Num(p.length()) +
                             "; expected [1, " + Num(max_length_) + "] (the shard's elements)");
    }
    size_t data_bytes = 0, scales_bytes = 0;
    switch (p.codec()) {
      case v1::CODEC_FP32: data_bytes = 4 * p.length(); break;
      case v1::CODEC_BF16: data_bytes = 2 * p.length(); break;
      case v1::CODEC_BLOCK_QUANT: {
        const Status q =
            ValidateQuantizeParams(static_cast<int>(p.bits()), static_cast<int>(p.block_size()));
        if (!q.ok()) return q.Annotate(where + "'s header");
        data_bytes = PackedBytes(p.length(), static_cast<int>(p.bits()));
        scales_bytes = 4 * NumBlocks(p.length(), static_cast<int>(p.block_size()));
        break;
      }
      default:
        return InvalidArgument(where + "'s header has codec " +
                               std::to_string(static_cast<int>(p.codec())) +
                               "; an answer is CODEC_FP32, CODEC_BF16 or CODEC_BLOCK_QUANT");
    }
    header_ = chunk.header();
    data_.resize(data_bytes);
    scales_.resize(scales_bytes);
    data_span_ = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data_.data()),
                                          data_.size());
  } else {
    if (chunk.has_header()) return InvalidArgument(where + " carries a header; only the first may");
    if (chunk.data().empty() && chunk.scales().empty()) {
      return InvalidArgument(where + " carries neither data nor scales");
    }
  }
  LOCO_RETURN_IF_ERROR(data_placed_.Add(where, "data", data_.size(), chunk.data_offset(),
                                        chunk.data().size()));
  LOCO_RETURN_IF_ERROR(scales_placed_.Add(where, "scales", scales_.size(),
                                          chunk.scales_offset(), chunk.scales().size()));
  if (!chunk.data().empty()) {
    std::memcpy(data_.data() + chunk.data_offset(), chunk.data().data(), chunk.data().size());
  }
  if (!chunk.scales().empty()) {
    std::memcpy(scales_.data() + chunk.scales_offset(), chunk.scales().data(),
                chunk.scales().size());
  }
  ++chunks_;
  return Status::Ok();
}

Status PulledParts::Finish() const {
  if (chunks_ == 0) return InvalidArgument("the pull stream carried no chunk");
  if (data_placed_.bytes() != data_.size() || scales_placed_.bytes() != scales_.size()) {
    return InvalidArgument("the pull stream covered " + Num(data_placed_.bytes()) + " of " +
                           Num(data_.size()) + " data bytes and " + Num(scales_placed_.bytes()) +
                           " of " + Num(scales_.size()) + " scales bytes; its chunks must "
                           "cover both exactly");
  }
  return Status::Ok();
}

PulledParamsView PulledParts::view() const {
  PulledParamsView v;
  v.header = &header_;
  v.scales = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(scales_.data()),
                                      scales_.size());
  v.data = std::span<const std::span<const uint8_t>>(&data_span_, 1);
  return v;
}

}  // namespace loco

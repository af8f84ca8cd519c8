#include "server/push_assembler.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/quantize.h"

namespace loco {
size_t PushAssembler::ExpectedDataBytes(const v1::Payload& header, size_t cap) {
  // Clamped first: a hostile length must not overflow the products below.
  const uint64_t n = std::min<uint64_t>(header.length(), cap);
  switch (header.codec()) {
    case v1::CODEC_FP32: return n * 4;
    case v1::CODEC_BF16: return n * 2;
    case v1::CODEC_BLOCK_QUANT:
      if (header.bits() == 2 || header.bits() == 4 || header.bits() == 8) {
        return PackedBytes(n, static_cast<int>(header.bits()));
      }
      return 0;
    default: return 0;
  }
}

void PushAssembler::TakeDataBuffer(size_t bytes) {
  if (buffers_ == nullptr) return;
  std::string spare = buffers_->Take(bytes);
  if (spare.capacity() >= bytes) *request_.mutable_gradient()->mutable_data() = std::move(spare);
}

Status PushAssembler::StartPlaced(const std::string& where) {
  const v1::Payload& g = request_.gradient();
  const std::string prefix = where + "'s placed header ";
  const bool quant = g.codec() == v1::CODEC_BLOCK_QUANT;
  if (!quant && g.codec() != v1::CODEC_FP32 && g.codec() != v1::CODEC_BF16) {
    return InvalidArgument(prefix + "has codec " + std::to_string(static_cast<int>(g.codec())) +
                           "; a placed push needs CODEC_FP32, CODEC_BF16 or CODEC_BLOCK_QUANT "
                           "to size its data");
  }
  if (quant && g.bits() != 2 && g.bits() != 4 && g.bits() != 8) {
    return InvalidArgument(prefix + "has bits " + std::to_string(g.bits()) +
                           "; expected 2, 4 or 8");
  }
  if (quant && (g.block_size() < 32 || g.block_size() > 4096 || g.block_size() % 32 != 0)) {
    return InvalidArgument(prefix + "has block_size " + std::to_string(g.block_size()) +
                           "; expected a multiple of 32 in [32, 4096]");
  }
  const size_t max_length = max_data_bytes_ / 4;
  if (g.length() == 0 || g.length() > max_length) {
    return InvalidArgument(prefix + "has length " + std::to_string(g.length()) +
                           "; a placed push needs a length in [1, " + std::to_string(max_length) +
                           "] (the elements of this shard)");
  }
  const size_t data_bytes = ExpectedDataBytes(g, max_length);
  const size_t scales_bytes =
      quant ? 4 * NumBlocks(g.length(), static_cast<int>(g.block_size())) : 0;
  TakeDataBuffer(data_bytes);
  request_.mutable_gradient()->mutable_data()->resize(data_bytes);
  request_.mutable_gradient()->mutable_scales()->resize(scales_bytes);
  return Status::Ok();
}

Status PushAssembler::Place(const std::string& where, const char* what, const std::string& piece,
                            uint64_t offset, std::string* buffer, PlacedRanges* received) {
  LOCO_RETURN_IF_ERROR(received->Add(where, what, buffer->size(), offset, piece.size()));
  if (!piece.empty()) std::memcpy(buffer->data() + offset, piece.data(), piece.size());
  return Status::Ok();
}

Status PushAssembler::Add(v1::PushChunk* chunk) {
  if (!failed_.ok()) return failed_;
  const std::string where = "push chunk " + std::to_string(chunks_);
  Status s = chunks_ == 0 ? TakeHeader(chunk, where) : CheckLaterChunk(*chunk, where);
  if (s.ok()) s = placed_ ? PlaceChunk(*chunk, where) : AppendInOrder(*chunk, where);
  if (!s.ok()) return Fail(s);
  ++chunks_;
  return Status::Ok();
}

Status PushAssembler::TakeHeader(v1::PushChunk* chunk, const std::string& where) {
  if (!chunk->has_header()) {
    return InvalidArgument(where +
                           " has no header; the first chunk must carry the "
                           "PushRequest (its gradient without data)");
  }
  const v1::Payload& header = chunk->header().gradient();
  if (!header.data().empty()) {
    return InvalidArgument(where + "'s header carries " + std::to_string(header.data().size()) +
                           " bytes of gradient data; send the data in the chunks' data field");
  }
  if (chunk->placed() && !header.scales().empty()) {
    return InvalidArgument(where + "'s placed header carries " +
                           std::to_string(header.scales().size()) +
                           " bytes of gradient scales; in a placed push send them in the "
                           "chunks' scales field");
  }
  request_ = std::move(*chunk->mutable_header());
  placed_ = chunk->placed();
  if (placed_) return StartPlaced(where);
  // Reserved once, for the size the header announces (at most the bound):
  // the chunks then fill it without the buffer growing by copies.
  const size_t expected = ExpectedDataBytes(request_.gradient(), max_data_bytes_);
  if (expected > 0) {
    TakeDataBuffer(std::min(expected, max_data_bytes_));
    request_.mutable_gradient()->mutable_data()->clear();
    request_.mutable_gradient()->mutable_data()->reserve(std::min(expected, max_data_bytes_));
  }
  return Status::Ok();
}

Status PushAssembler::CheckLaterChunk(const v1::PushChunk& chunk, const std::string& where) const {
  if (chunk.has_header()) {
    return InvalidArgument(where + " carries a header; only the first chunk may");
  }
  if (chunk.placed()) {
    return InvalidArgument(where +
                           " sets placed; only the first chunk may (it picks the "
                           "stream's layout)");
  }
  if (placed_ && chunk.data().empty() && chunk.scales().empty()) {
    return InvalidArgument(where +
                           " carries neither data nor scales; every chunk of a placed "
                           "push after the first must carry one");
  }
  if (!placed_ && chunk.data().empty()) {
    return InvalidArgument(where + " carries no data; every chunk after the first must");
  }
  return Status::Ok();
}

Status PushAssembler::PlaceChunk(const v1::PushChunk& chunk, const std::string& where) {
  v1::Payload* gradient = request_.mutable_gradient();
  LOCO_RETURN_IF_ERROR(
      Place(where, "data", chunk.data(), chunk.data_offset(), gradient->mutable_data(), &data_));
  return Place(where, "scales", chunk.scales(), chunk.scales_offset(), gradient->mutable_scales(),
               &scales_);
}

Status PushAssembler::AppendInOrder(const v1::PushChunk& chunk, const std::string& where) {
  const char* field = chunk.data_offset() != 0     ? "data_offset"
                      : !chunk.scales().empty()    ? "scales"
                      : chunk.scales_offset() != 0 ? "scales_offset"
                                                   : nullptr;
  if (field != nullptr) {
    return InvalidArgument(where + " sets " + field +
                           ", which only a placed push may (its "
                           "first chunk sets placed); in order, send the data in order and the "
                           "scales in the header");
  }
  // A header alone adds no gradient: a withdrawal must reach the shard as
  // the unary one does, without a payload.
  if (chunk.data().empty()) return Status::Ok();
  std::string* data = request_.mutable_gradient()->mutable_data();
  if (chunk.data().size() > max_data_bytes_ - data->size()) {
    return InvalidArgument("the push's data passes " + std::to_string(max_data_bytes_) +
                           " bytes at " + where +
                           ", more than any payload of this shard needs "
                           "(4 bytes per element)");
  }
  data->append(chunk.data());
  return Status::Ok();
}

StatusOr<v1::PushRequest> PushAssembler::Finish() {
  if (!failed_.ok()) return failed_;
  if (chunks_ == 0) return InvalidArgument("the push stream carried no chunk");
  if (placed_) {
    const v1::Payload& g = request_.gradient();
    if (data_.bytes() != g.data().size()) {
      return Fail(InvalidArgument("the placed push covered " + std::to_string(data_.bytes()) +
                                  " of " + std::to_string(g.data().size()) +
                                  " data bytes; its chunks must cover "
                                  "the gradient's data exactly"));
    }
    if (scales_.bytes() != g.scales().size()) {
      return Fail(InvalidArgument("the placed push covered " + std::to_string(scales_.bytes()) +
                                  " of " + std::to_string(g.scales().size()) +
                                  " scales bytes; its chunks must "
                                  "cover the gradient's scales exactly"));
    }
  }
  chunks_ = 0;
  placed_ = false;
  data_.Clear();
  scales_.Clear();
  return std::exchange(request_, v1::PushRequest());
}

}  // namespace loco

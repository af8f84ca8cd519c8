#include "server/push_assembler.h"

#include <algorithm>
#include <utility>

#include "kernels/quantize.h"

namespace loco {
namespace {

std::string Num(uint64_t x) { return std::to_string(x); }

}  // namespace

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

Status PushAssembler::Add(v1::PushChunk* chunk) {
  if (!failed_.ok()) return failed_;
  const std::string where = "push chunk " + Num(chunks_);
  if (chunks_ == 0) {
    if (!chunk->has_header()) {
      failed_ = InvalidArgument(where + " has no header; the first chunk must carry the "
                                "PushRequest (its gradient without data)");
      return failed_;
    }
    if (!chunk->header().gradient().data().empty()) {
      failed_ = InvalidArgument(where + "'s header carries " +
                                Num(chunk->header().gradient().data().size()) +
                                " bytes of gradient data; send the data in the chunks' data "
                                "field");
      return failed_;
    }
    request_ = std::move(*chunk->mutable_header());
    // Reserved once, for the size the header announces (at most the bound):
    // the chunks then fill it without the buffer growing by copies.
    const size_t expected = ExpectedDataBytes(request_.gradient(), max_data_bytes_);
    if (expected > 0) {
      request_.mutable_gradient()->mutable_data()->reserve(std::min(expected, max_data_bytes_));
    }
  } else {
    if (chunk->has_header()) {
      failed_ = InvalidArgument(where + " carries a header; only the first chunk may");
      return failed_;
    }
    if (chunk->data().empty()) {
      failed_ = InvalidArgument(where + " carries no data; every chunk after the first must");
      return failed_;
    }
  }
  std::string* data = request_.mutable_gradient()->mutable_data();
  if (chunk->data().size() > max_data_bytes_ - data->size()) {
    failed_ = InvalidArgument("the push's data passes " + Num(max_data_bytes_) + " bytes at " +
                              where + ", more than any payload of this shard needs (4 bytes per "
                              "element)");
    return failed_;
  }
  data->append(chunk->data());
  ++chunks_;
  return Status::Ok();
}

StatusOr<v1::PushRequest> PushAssembler::Finish() {
  if (!failed_.ok()) return failed_;
  if (chunks_ == 0) return InvalidArgument("the push stream carried no chunk");
  chunks_ = 0;
  return std::exchange(request_, v1::PushRequest());
}

}  // namespace loco

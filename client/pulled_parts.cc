#include "client/pulled_parts.h"

#include <cstring>

#include "kernels/quantize.h"
#include "rpc/payload_bytes.h"
#include "rpc/slice_reader.h"
#include "rpc/wire_format.h"

namespace loco {
namespace {

// PullChunk's fields, as the generated code numbers them.
constexpr uint32_t kChunkHeader = v1::PullChunk::kHeaderFieldNumber;
constexpr uint32_t kChunkData = v1::PullChunk::kDataFieldNumber;
constexpr uint32_t kChunkDataOffset = v1::PullChunk::kDataOffsetFieldNumber;
constexpr uint32_t kChunkScales = v1::PullChunk::kScalesFieldNumber;
constexpr uint32_t kChunkScalesOffset = v1::PullChunk::kScalesOffsetFieldNumber;

}  // namespace

void PulledParts::Reset(uint64_t max_length) {
  max_length_ = max_length;
  chunks_ = 0;
  header_.Clear();
  data_placed_.Clear();
  scales_placed_.Clear();
  data_span_ = {};
}

Status PulledParts::Add(const v1::PullChunk& chunk) {
  Chunk c;
  if (chunk.has_header()) c.header = &chunk.header();
  const auto bytes = [](const std::string& s) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  if (!chunk.data().empty()) c.data.push_back(bytes(chunk.data()));
  if (!chunk.scales().empty()) c.scales.push_back(bytes(chunk.scales()));
  c.data_offset = chunk.data_offset();
  c.scales_offset = chunk.scales_offset();
  return AddChunk(c);
}

Status PulledParts::Add(const grpc::ByteBuffer& bytes) {
  slices_.clear();
  const grpc::Status dumped = bytes.Dump(&slices_);
  if (!dumped.ok()) return DataLoss("pull chunk could not be read: " + dumped.error_message());
  size_t total = 0;
  for (const grpc::Slice& s : slices_) total += s.size();
  Chunk c;
  wire::SliceReader in(slices_, "PullChunk");
  bool has_header = false;
  while (in.position() < total) {
    wire::SliceReader::Field f;
    LOCO_RETURN_IF_ERROR(in.ReadField(total, &f));
    if (f.wire_type == wire::kVarint) {
      if (f.number == kChunkDataOffset) c.data_offset = f.value;
      if (f.number == kChunkScalesOffset) c.scales_offset = f.value;
      continue;
    }
    if (f.wire_type != wire::kLengthDelimited) continue;
    if (f.number == kChunkHeader) {
      // Small: parsed by protobuf (a second header merges into the first).
      in.Copy(f.length, &header_bytes_);
      if (!has_header) chunk_header_.Clear();
      if (!chunk_header_.MergeFromString(header_bytes_)) {
        return in.Malformed("its header is not a PullResponse", in.position() - f.length);
      }
      has_header = true;
    } else if (f.number == kChunkData) {
      c.data.clear();  // the last one wins
      in.Take(f.length, &c.data);
    } else if (f.number == kChunkScales) {
      c.scales.clear();
      in.Take(f.length, &c.scales);
    } else {
      in.Skip(f.length);
    }
  }
  if (has_header) c.header = &chunk_header_;
  const Status s = AddChunk(c);
  slices_.clear();  // gRPC's receive buffers go back
  return s;
}

Status PulledParts::Place(const std::string& where, const char* what,
                          const std::vector<std::span<const uint8_t>>& pieces, uint64_t offset,
                          std::string* buffer, PlacedRanges* placed) {
  uint64_t bytes = 0;
  for (const auto& p : pieces) bytes += p.size();
  LOCO_RETURN_IF_ERROR(placed->Add(where, what, buffer->size(), offset, bytes));
  for (const auto& p : pieces) {
    std::memcpy(buffer->data() + offset, p.data(), p.size());
    offset += p.size();
  }
  return Status::Ok();
}

Status PulledParts::AddChunk(const Chunk& chunk) {
  const std::string where = "pull chunk " + std::to_string(chunks_);
  if (chunks_ == 0) {
    if (chunk.header == nullptr) {
      return InvalidArgument(where + " has no header; the first chunk must carry the answer's "
                             "PullResponse");
    }
    const v1::Payload& p = chunk.header->params();
    if (!p.data().empty() || !p.scales().empty()) {
      return InvalidArgument(where + "'s header carries data or scales; they belong in the "
                             "chunks' fields");
    }
    if (p.length() == 0 || p.length() > max_length_) {
      return InvalidArgument(where + "'s header has length " + std::to_string(p.length()) +
                             "; expected [1, " + std::to_string(max_length_) +
                             "] (the shard's elements)");
    }
    if (p.codec() == v1::CODEC_BLOCK_QUANT) {
      const Status q =
          ValidateQuantizeParams(static_cast<int>(p.bits()), static_cast<int>(p.block_size()));
      if (!q.ok()) return q.Annotate(where + "'s header");
    } else if (p.codec() != v1::CODEC_FP32 && p.codec() != v1::CODEC_BF16) {
      return InvalidArgument(where + "'s header has codec " +
                             std::to_string(static_cast<int>(p.codec())) +
                             "; an answer is CODEC_FP32, CODEC_BF16 or CODEC_BLOCK_QUANT");
    }
    header_ = *chunk.header;
    // Same size as the last answer (the usual case): no reallocation and
    // no clearing; every byte is written again before Finish accepts.
    data_.resize(PayloadDataBytes(p, p.length()));
    scales_.resize(PayloadScaleBytes(p, p.length()));
    data_span_ = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data_.data()),
                                          data_.size());
  } else {
    if (chunk.header != nullptr) {
      return InvalidArgument(where + " carries a header; only the first may");
    }
    if (chunk.data.empty() && chunk.scales.empty()) {
      return InvalidArgument(where + " carries neither data nor scales");
    }
  }
  LOCO_RETURN_IF_ERROR(Place(where, "data", chunk.data, chunk.data_offset, &data_, &data_placed_));
  LOCO_RETURN_IF_ERROR(
      Place(where, "scales", chunk.scales, chunk.scales_offset, &scales_, &scales_placed_));
  ++chunks_;
  return Status::Ok();
}

Status PulledParts::Finish() const {
  if (chunks_ == 0) return InvalidArgument("the pull stream carried no chunk");
  if (data_placed_.bytes() != data_.size() || scales_placed_.bytes() != scales_.size()) {
    return InvalidArgument("the pull stream covered " + std::to_string(data_placed_.bytes()) +
                           " of " + std::to_string(data_.size()) + " data bytes and " +
                           std::to_string(scales_placed_.bytes()) + " of " +
                           std::to_string(scales_.size()) +
                           " scales bytes; its chunks must cover both exactly");
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

#include "client/placed_push_stream.h"

#include <vector>

#include <grpcpp/support/slice.h>

#include "client/push_chunks.h"
#include "rpc/wire_format.h"

namespace loco {
namespace {

// PushChunk's fields, as the generated code numbers them.
constexpr uint32_t kPushChunkHeader = v1::PushChunk::kHeaderFieldNumber;
constexpr uint32_t kPushChunkData = v1::PushChunk::kDataFieldNumber;
constexpr uint32_t kPushChunkPlaced = v1::PushChunk::kPlacedFieldNumber;
constexpr uint32_t kPushChunkDataOffset = v1::PushChunk::kDataOffsetFieldNumber;
constexpr uint32_t kPushChunkScales = v1::PushChunk::kScalesFieldNumber;
constexpr uint32_t kPushChunkScalesOffset = v1::PushChunk::kScalesOffsetFieldNumber;

}  // namespace

PlacedPushStream::PlacedPushStream(const std::shared_ptr<grpc::Channel>& channel,
                                   grpc::ClientContext* ctx, const v1::PushRequest& req,
                                   v1::PushResponse* resp)
    : req_(req), writer_(OpenPushStream(channel, ctx, resp)) {
  const v1::PushRequest header = PushStreamHeader(req, /*with_scales=*/false);
  const std::string bytes = header.SerializeAsString();
  wire::AppendKeyAndLength(kPushChunkHeader, bytes.size(), &header_);
  header_ += bytes;
  wire::AppendVarintField(kPushChunkPlaced, 1, &header_);
}

PlacedPushStream::~PlacedPushStream() = default;

bool PlacedPushStream::Write(size_t data_offset, size_t data_bytes, size_t scales_offset,
                             size_t scales_bytes) {
  if (broken_) return false;
  const v1::Payload& g = req_.gradient();
  std::string head = std::move(header_);
  header_.clear();
  std::vector<grpc::Slice> slices;
  if (data_bytes > 0) {
    wire::AppendVarintField(kPushChunkDataOffset, data_offset, &head);
    wire::AppendKeyAndLength(kPushChunkData, data_bytes, &head);
    slices.emplace_back(head);
    // Not owned: gRPC reads it until the write completes, and the
    // request's buffers outlive the call (see the header).
    slices.emplace_back(g.data().data() + data_offset, data_bytes, grpc::Slice::STATIC_SLICE);
    head.clear();
  }
  if (scales_bytes > 0) {
    wire::AppendVarintField(kPushChunkScalesOffset, scales_offset, &head);
    wire::AppendKeyAndLength(kPushChunkScales, scales_bytes, &head);
    slices.emplace_back(head);
    slices.emplace_back(g.scales().data() + scales_offset, scales_bytes,
                        grpc::Slice::STATIC_SLICE);
    head.clear();
  }
  if (!head.empty()) slices.emplace_back(head);  // a first chunk with no part
  if (slices.empty()) return true;
  broken_ = !writer_->Write(grpc::ByteBuffer(slices.data(), slices.size()));
  return !broken_;
}

grpc::Status PlacedPushStream::Finish() {
  if (!header_.empty()) {
    // Nothing was written: the header still opens the stream, so that the
    // server answers for the whole (empty) push.
    grpc::Slice head(header_);
    header_.clear();
    if (!writer_->Write(grpc::ByteBuffer(&head, 1))) broken_ = true;
  }
  writer_->WritesDone();
  return writer_->Finish();
}

}  // namespace loco

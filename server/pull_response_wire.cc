#include "server/pull_response_wire.h"

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/support/slice.h>

#include "rpc/wire_format.h"

namespace loco {
namespace {

// PullResponse.params, and Payload.scales and .data (proto/loco.proto).
constexpr uint32_t kPullResponseParams = 2;
constexpr uint32_t kPayloadScales = 6;
constexpr uint32_t kPayloadData = 7;

using wire::AppendKeyAndLength;
using wire::BytesFieldSize;

// PullChunk's fields, as the generated code numbers them.
constexpr uint32_t kChunkHeader = v1::PullChunk::kHeaderFieldNumber;
constexpr uint32_t kChunkData = v1::PullChunk::kDataFieldNumber;
constexpr uint32_t kChunkDataOffset = v1::PullChunk::kDataOffsetFieldNumber;
constexpr uint32_t kChunkScales = v1::PullChunk::kScalesFieldNumber;
constexpr uint32_t kChunkScalesOffset = v1::PullChunk::kScalesOffsetFieldNumber;

// A slice over `size` bytes of `body` from `offset` that owns one reference
// to it; gRPC drops the reference once the bytes are sent (or the buffer is
// destroyed).
grpc::Slice SharedSlice(const std::shared_ptr<const std::string>& body, size_t offset,
                        size_t size) {
  auto* ref = new std::shared_ptr<const std::string>(body);
  // gRPC never writes through a slice it was given to send.
  void* bytes = const_cast<char*>(body->data() + offset);
  return grpc::Slice(bytes, size,
                     [](void* user_data) {
                       delete static_cast<std::shared_ptr<const std::string>*>(user_data);
                     },
                     ref);
}

}  // namespace

grpc::ByteBuffer PullResponseToWire(const v1::PullResponse& header,
                                    const ReturnPath::SharedBody& body) {
  const std::string payload_header = header.params().SerializeAsString();
  const bool has_scales = body.scales && !body.scales->empty();
  const bool has_data = body.data && !body.data->empty();
  size_t payload_size = payload_header.size();
  if (has_scales) payload_size += BytesFieldSize(kPayloadScales, body.scales->size());
  if (has_data) payload_size += BytesFieldSize(kPayloadData, body.data->size());

  v1::PullResponse outer = header;
  outer.clear_params();
  std::string head = outer.SerializeAsString();
  AppendKeyAndLength(kPullResponseParams, payload_size, &head);
  head += payload_header;

  std::vector<grpc::Slice> slices;
  slices.reserve(4);
  if (has_scales) {
    AppendKeyAndLength(kPayloadScales, body.scales->size(), &head);
    slices.emplace_back(head);
    slices.push_back(SharedSlice(body.scales, 0, body.scales->size()));
    head.clear();
  }
  if (has_data) {
    AppendKeyAndLength(kPayloadData, body.data->size(), &head);
    slices.emplace_back(head);
    slices.push_back(SharedSlice(body.data, 0, body.data->size()));
    head.clear();
  }
  if (!head.empty()) slices.emplace_back(head);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::ByteBuffer PullChunkToWire(const v1::PullResponse* header,
                                 const std::shared_ptr<const std::string>& data,
                                 size_t data_offset, size_t data_bytes,
                                 const std::shared_ptr<const std::string>& scales,
                                 size_t scales_offset, size_t scales_bytes) {
  std::string head;
  if (header != nullptr) {
    const std::string h = header->SerializeAsString();
    AppendKeyAndLength(kChunkHeader, h.size(), &head);
    head += h;
  }
  if (data_offset != 0) wire::AppendVarintField(kChunkDataOffset, data_offset, &head);
  if (scales_offset != 0) wire::AppendVarintField(kChunkScalesOffset, scales_offset, &head);
  std::vector<grpc::Slice> slices;
  slices.reserve(4);
  if (data_bytes > 0) {
    AppendKeyAndLength(kChunkData, data_bytes, &head);
    slices.emplace_back(head);
    slices.push_back(SharedSlice(data, data_offset, data_bytes));
    head.clear();
  }
  if (scales_bytes > 0) {
    AppendKeyAndLength(kChunkScales, scales_bytes, &head);
    slices.emplace_back(head);
    slices.push_back(SharedSlice(scales, scales_offset, scales_bytes));
    head.clear();
  }
  if (!head.empty()) slices.emplace_back(head);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace loco

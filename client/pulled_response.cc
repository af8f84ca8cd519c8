#include "client/pulled_response.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "rpc/slice_reader.h"
#include "rpc/wire_format.h"

namespace loco {
namespace {

using wire::kLengthDelimited;
using wire::kVarint;
using Field = wire::SliceReader::Field;

// The fields this reader looks at (proto/loco.proto).
constexpr uint32_t kResponseVersion = 1;
constexpr uint32_t kResponseParams = 2;
constexpr uint32_t kResponseIsDelta = 3;

constexpr uint32_t kPayloadCodec = 1;
constexpr uint32_t kPayloadBits = 2;
constexpr uint32_t kPayloadBlockSize = 3;
constexpr uint32_t kPayloadOffset = 4;
constexpr uint32_t kPayloadLength = 5;
constexpr uint32_t kPayloadScales = 6;
constexpr uint32_t kPayloadData = 7;

}  // namespace

void PulledResponse::Release() {
  header_.Clear();
  slices_.clear();
  scales_.clear();
  data_.clear();
}

Status PulledResponse::Read(const grpc::ByteBuffer& bytes) {
  Release();
  const grpc::Status dumped = bytes.Dump(&slices_);
  if (!dumped.ok()) {
    Release();
    return DataLoss("pull answer could not be read: " + dumped.error_message());
  }
  size_t total = 0;
  for (const grpc::Slice& s : slices_) total += s.size();
  Status s = [&]() -> Status {
    wire::SliceReader cur(slices_, "PullResponse");
    while (cur.position() < total) {
      Field f;
      LOCO_RETURN_IF_ERROR(cur.ReadField(total, &f));
      if (f.number == kResponseVersion && f.wire_type == kVarint) {
        header_.set_version(f.value);
      } else if (f.number == kResponseIsDelta && f.wire_type == kVarint) {
        header_.set_is_delta(f.value != 0);
      } else if (f.number == kResponseParams && f.wire_type == kLengthDelimited) {
        // A second `params` merges into the first, as protobuf does.
        v1::Payload* p = header_.mutable_params();
        const size_t end = cur.position() + f.length;
        while (cur.position() < end) {
          Field g;
          LOCO_RETURN_IF_ERROR(cur.ReadField(end, &g));
          if (g.wire_type == kVarint) {
            switch (g.number) {
              case kPayloadCodec:
                p->set_codec(static_cast<v1::Codec>(static_cast<int32_t>(g.value)));
                continue;
              case kPayloadBits:
                p->set_bits(static_cast<uint32_t>(g.value));
                continue;
              case kPayloadBlockSize:
                p->set_block_size(static_cast<uint32_t>(g.value));
                continue;
              case kPayloadOffset:
                p->set_offset(g.value);
                continue;
              case kPayloadLength:
                p->set_length(g.value);
                continue;
              default:
                continue;
            }
          }
          if (g.wire_type != kLengthDelimited) continue;
          if (g.number == kPayloadScales) {
            cur.Copy(g.length, &scales_);  // the last one wins
          } else if (g.number == kPayloadData) {
            data_.clear();  // the last one wins
            cur.Take(g.length, &data_);
          } else {
            cur.Skip(g.length);
          }
        }
      } else if (f.wire_type == kLengthDelimited) {
        cur.Skip(f.length);
      }
    }
    return Status::Ok();
  }();
  if (!s.ok()) Release();
  return s;
}

PulledParamsView PulledResponse::view() const {
  PulledParamsView v;
  v.header = &header_;
  v.scales = scales_;
  v.data = data_;
  return v;
}

}  // namespace loco

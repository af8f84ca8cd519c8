#include "worker/pulled_response.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "proto/wire_format.h"

namespace loco {
namespace {

using wire::kFixed32;
using wire::kFixed64;
using wire::kLengthDelimited;
using wire::kVarint;

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

Status Malformed(const std::string& why, size_t at) {
  return DataLoss("pull answer is not a valid PullResponse: " + why + " at byte " +
                  std::to_string(at));
}

// A read position in a sequence of slices, and the byte count behind it.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices) : slices_(slices) { SkipEmpty(); }

  size_t position() const { return position_; }

  [[nodiscard]] bool ReadByte(uint8_t* b) {
    if (slice_ == slices_.size()) return false;
    *b = slices_[slice_].begin()[at_];
    Advance(1);
    return true;
  }

  // A protobuf varint (at most 10 bytes).
  [[nodiscard]] Status ReadVarint(uint64_t* value) {
    const size_t at = position_;
    uint64_t v = 0;
    for (int i = 0; i < 10; ++i) {
      uint8_t b = 0;
      if (!ReadByte(&b)) return Malformed("truncated varint", at);
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) {
        *value = v;
        return Status::Ok();
      }
    }
    return Malformed("varint longer than 10 bytes", at);
  }

  // The next `n` bytes as pieces that point into the slices, appended to *out.
  void Take(size_t n, std::vector<std::span<const uint8_t>>* out) {
    while (n > 0) {
      const size_t take = std::min(n, slices_[slice_].size() - at_);
      out->emplace_back(slices_[slice_].begin() + at_, take);
      Advance(take);
      n -= take;
    }
  }

  // The next `n` bytes copied to *out.
  void Copy(size_t n, std::vector<uint8_t>* out) {
    out->resize(n);
    for (size_t got = 0; got < n;) {
      const size_t take = std::min(n - got, slices_[slice_].size() - at_);
      std::memcpy(out->data() + got, slices_[slice_].begin() + at_, take);
      Advance(take);
      got += take;
    }
  }

  void Skip(size_t n) {
    while (n > 0) {
      const size_t take = std::min(n, slices_[slice_].size() - at_);
      Advance(take);
      n -= take;
    }
  }

 private:
  void Advance(size_t n) {
    at_ += n;
    position_ += n;
    SkipEmpty();
  }
  void SkipEmpty() {
    while (slice_ < slices_.size() && at_ == slices_[slice_].size()) {
      ++slice_;
      at_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0;
  size_t at_ = 0;
  size_t position_ = 0;
};

struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  uint64_t value = 0;   // varint (fixed-width values are skipped: none is used)
  uint64_t length = 0;  // length-delimited: the bytes follow at the cursor
};

// Reads one field's key and, unless length-delimited, its value; `end` is
// where the enclosing message ends.
Status ReadField(SliceCursor& cur, size_t end, Field* f) {
  const size_t at = cur.position();
  uint64_t key = 0;
  LOCO_RETURN_IF_ERROR(cur.ReadVarint(&key));
  if (key >> 3 == 0 || key >> 3 > 0x1fffffff) return Malformed("invalid field number", at);
  f->number = static_cast<uint32_t>(key >> 3);
  f->wire_type = static_cast<uint32_t>(key & 7);
  const auto past_end = [&] { return Malformed("field runs past the end of its message", at); };
  if (cur.position() > end) return past_end();
  switch (f->wire_type) {
    case kVarint:
      LOCO_RETURN_IF_ERROR(cur.ReadVarint(&f->value));
      if (cur.position() > end) return past_end();
      break;
    case kFixed64:
    case kFixed32: {
      const size_t bytes = f->wire_type == kFixed64 ? 8 : 4;
      if (end - cur.position() < bytes) return past_end();
      cur.Skip(bytes);
      break;
    }
    case kLengthDelimited:
      LOCO_RETURN_IF_ERROR(cur.ReadVarint(&f->length));
      if (cur.position() > end || f->length > end - cur.position()) return past_end();
      break;
    default:
      return Malformed("unsupported wire type " + std::to_string(f->wire_type), at);
  }
  return Status::Ok();
}

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
    SliceCursor cur(slices_);
    while (cur.position() < total) {
      Field f;
      LOCO_RETURN_IF_ERROR(ReadField(cur, total, &f));
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
          LOCO_RETURN_IF_ERROR(ReadField(cur, end, &g));
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

#include "rpc/slice_reader.h"

#include <algorithm>
#include <cstring>

#include "rpc/wire_format.h"

namespace loco::wire {

SliceReader::SliceReader(const std::vector<grpc::Slice>& slices, const char* what)
    : slices_(slices), what_(what) {
  SkipEmpty();
}

Status SliceReader::Malformed(const std::string& why, size_t at) const {
  return DataLoss(std::string("pull answer is not a valid ") + what_ + ": " + why +
                  " at byte " + std::to_string(at));
}

bool SliceReader::ReadByte(uint8_t* b) {
  if (slice_ == slices_.size()) return false;
  *b = slices_[slice_].begin()[at_];
  Advance(1);
  return true;
}

Status SliceReader::ReadVarint(uint64_t* value, int max_bytes) {
  const size_t at = position_;
  uint64_t v = 0;
  for (int i = 0; i < max_bytes; ++i) {
    uint8_t b = 0;
    if (!ReadByte(&b)) return Malformed("truncated varint", at);
    v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) {
      *value = v;
      return Status::Ok();
    }
  }
  return Malformed("varint longer than " + std::to_string(max_bytes) + " bytes", at);
}

void SliceReader::Take(size_t n, std::vector<std::span<const uint8_t>>* out) {
  while (n > 0) {
    const size_t take = std::min(n, slices_[slice_].size() - at_);
    out->emplace_back(slices_[slice_].begin() + at_, take);
    Advance(take);
    n -= take;
  }
}

template <typename Out>
void SliceReader::CopyTo(size_t n, Out* out) {
  out->resize(n);
  for (size_t got = 0; got < n;) {
    const size_t take = std::min(n - got, slices_[slice_].size() - at_);
    std::memcpy(out->data() + got, slices_[slice_].begin() + at_, take);
    Advance(take);
    got += take;
  }
}

void SliceReader::Copy(size_t n, std::vector<uint8_t>* out) { CopyTo(n, out); }
void SliceReader::Copy(size_t n, std::string* out) { CopyTo(n, out); }

void SliceReader::Skip(size_t n) {
  while (n > 0) {
    const size_t take = std::min(n, slices_[slice_].size() - at_);
    Advance(take);
    n -= take;
  }
}

Status SliceReader::ReadField(size_t end, Field* f) {
  const size_t at = position_;
  uint64_t key = 0;
  LOCO_RETURN_IF_ERROR(ReadVarint(&key, kMaxKeyBytes));
  if (key >> 3 == 0 || key >> 3 > 0x1fffffff) return Malformed("invalid field number", at);
  f->number = static_cast<uint32_t>(key >> 3);
  f->wire_type = static_cast<uint32_t>(key & 7);
  const auto past_end = [&] { return Malformed("field runs past the end of its message", at); };
  if (position_ > end) return past_end();
  switch (f->wire_type) {
    case kVarint:
      LOCO_RETURN_IF_ERROR(ReadVarint(&f->value));
      if (position_ > end) return past_end();
      break;
    case kFixed64:
    case kFixed32: {
      const size_t bytes = f->wire_type == kFixed64 ? 8 : 4;
      if (end - position_ < bytes) return past_end();
      Skip(bytes);
      break;
    }
    case kLengthDelimited:
      LOCO_RETURN_IF_ERROR(ReadVarint(&f->length, kMaxLengthBytes));
      if (position_ > end || f->length > end - position_) return past_end();
      break;
    default:
      return Malformed("unsupported wire type " + std::to_string(f->wire_type), at);
  }
  return Status::Ok();
}

void SliceReader::Advance(size_t n) {
  at_ += n;
  position_ += n;
  SkipEmpty();
}

void SliceReader::SkipEmpty() {
  while (slice_ < slices_.size() && at_ == slices_[slice_].size()) {
    ++slice_;
    at_ = 0;
  }
}

}  // namespace loco::wire

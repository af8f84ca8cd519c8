#include "client/param_payload_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cast.h"
#include "kernels/quantize.h"

namespace loco {
namespace {

// Elements dequantized per pass when a delta is added to the slice: bounded
// scratch (64 KiB) instead of a temporary as large as the shard.
constexpr size_t kDeltaChunk = 16384;
// Elements checked or converted per pass of a full copy.
constexpr size_t kCopyChunk = 16384;

// Reads a body that lies in pieces, front to back. The caller checked that
// the pieces hold at least what it asks for.
class PieceReader {
 public:
  explicit PieceReader(std::span<const std::span<const uint8_t>> pieces) : pieces_(pieces) {
    SkipEmpty();
  }
  // Bytes readable without crossing into the next piece.
  size_t Contiguous() const { return piece_ < pieces_.size() ? pieces_[piece_].size() - at_ : 0; }
  // The next `bytes` bytes: where they lie when one piece holds them all,
  // else gathered into *scratch.
  const uint8_t* Next(size_t bytes, std::vector<uint8_t>* scratch) {
    if (bytes <= Contiguous()) {
      const uint8_t* p = pieces_[piece_].data() + at_;
      at_ += bytes;
      SkipEmpty();
      return p;
    }
    scratch->resize(bytes);
    for (size_t got = 0; got < bytes && Contiguous() > 0;) {
      const size_t take = std::min(bytes - got, Contiguous());
      std::memcpy(scratch->data() + got, pieces_[piece_].data() + at_, take);
      got += take;
      at_ += take;
      SkipEmpty();
    }
    return scratch->data();
  }

 private:
  void SkipEmpty() {
    while (piece_ < pieces_.size() && at_ == pieces_[piece_].size()) {
      ++piece_;
      at_ = 0;
    }
  }

  std::span<const std::span<const uint8_t>> pieces_;
  size_t piece_ = 0;
  size_t at_ = 0;
};

size_t TotalBytes(std::span<const std::span<const uint8_t>> pieces) {
  size_t n = 0;
  for (const auto& p : pieces) n += p.size();
  return n;
}

// Index of the first non-finite value (exponent bits all ones), or n. The
// values are read with memcpy: a piece of gRPC's buffer has no alignment.
size_t FirstNonFiniteFp32(const uint8_t* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, bytes + 4 * i, 4);
    if ((bits & 0x7F800000u) == 0x7F800000u) return i;
  }
  return n;
}
size_t FirstNonFiniteBf16(const uint8_t* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, bytes + 2 * i, 2);
    if ((bits & 0x7F80u) == 0x7F80u) return i;
  }
  return n;
}

Status NotFinite(const char* what, size_t i) {
  return DataLoss(std::string("pulled ") + what + " element " + std::to_string(i) +
                  " is not finite; the server must send finite values");
}

// Checks every element of a full copy (`elem` bytes each) before anything
// is written.
Status CheckFullCopy(std::span<const std::span<const uint8_t>> data, size_t n, size_t elem) {
  PieceReader reader(data);
  std::vector<uint8_t> gathered;
  for (size_t i = 0; i < n; i += kCopyChunk) {
    const size_t len = std::min(kCopyChunk, n - i);
    const uint8_t* p = reader.Next(len * elem, &gathered);
    const size_t bad = elem == 4 ? FirstNonFiniteFp32(p, len) : FirstNonFiniteBf16(p, len);
    if (bad < len) return NotFinite("parameter", i + bad);
  }
  return Status::Ok();
}

// A delta's scales, once everything about it is checked: that it applies
// to the version held, its codec and quantization, the sizes of its codes
// and scales for `n` elements, and that every scale is finite.
StatusOr<std::vector<float>> CheckedDeltaScales(const PulledParamsView& pulled, size_t n,
                                                bool have_any, uint64_t have_version) {
  const v1::PullResponse& response = *pulled.header;
  const v1::Payload& p = response.params();
  if (!have_any || response.version() != have_version + 1) {
    return DataLoss("pulled a delta to version " + std::to_string(response.version()) +
                    " but the worker holds " +
                    (have_any ? "version " + std::to_string(have_version) : "nothing") +
                    "; a delta must apply to version - 1");
  }
  if (p.codec() != v1::CODEC_BLOCK_QUANT) {
    return DataLoss("pulled delta has codec " + v1::Codec_Name(p.codec()) +
                    "; expected CODEC_BLOCK_QUANT");
  }
  const int bits = static_cast<int>(p.bits());
  const int block = static_cast<int>(p.block_size());
  Status q = ValidateQuantizeParams(bits, block);
  if (!q.ok()) return q.Annotate("pulled delta");
  const size_t blocks = NumBlocks(n, block);
  const size_t data_bytes = TotalBytes(pulled.data);
  if (data_bytes != PackedBytes(n, bits) || pulled.scales.size() != 4 * blocks) {
    return DataLoss("pulled delta has " + std::to_string(data_bytes) + " code bytes and " +
                    std::to_string(pulled.scales.size()) + " scale bytes; expected " +
                    std::to_string(PackedBytes(n, bits)) + " and " +
                    std::to_string(4 * blocks));
  }
  std::vector<float> scales(blocks);
  if (blocks > 0) std::memcpy(scales.data(), pulled.scales.data(), 4 * blocks);
  for (size_t b = 0; b < blocks; ++b) {
    if (!std::isfinite(scales[b])) return NotFinite("delta scale", b);
  }
  return scales;
}

// slice += D(delta), as the server moved its replica. Precondition: the
// delta passed CheckedDeltaScales, which gave `scales`. Each run starts on a
// block boundary, hence on a byte boundary of the codes (block sizes are
// multiples of 32, bits 2, 4 or 8), and takes the whole blocks that the
// current piece holds (at least one block, gathered when it straddles two
// pieces).
Status AddDelta(const PulledParamsView& pulled, const std::vector<float>& scales,
                std::span<float> slice) {
  const v1::Payload& p = pulled.header->params();
  const int bits = static_cast<int>(p.bits());
  const int block = static_cast<int>(p.block_size());
  const size_t n = slice.size();
  const size_t block_bytes = static_cast<size_t>(block) * bits / 8;
  const size_t chunk = std::max<size_t>(block, kDeltaChunk / block * block);
  std::vector<uint8_t> gathered;
  PieceReader reader(pulled.data);
  for (size_t start = 0; start < n;) {
    const size_t whole = std::max<size_t>(1, reader.Contiguous() / block_bytes);
    const size_t len = std::min({chunk, whole * block, n - start});
    const size_t end_byte = start + len == n ? PackedBytes(n, bits) : (start + len) * bits / 8;
    const uint8_t* codes = reader.Next(end_byte - start * bits / 8, &gathered);
    Status d = cpu::DequantizeAdd(codes, scales.data() + start / block, len, bits, block,
                                  slice.data() + start);
    if (!d.ok()) return d.Annotate("pulled delta");  // unreachable after validation
    start += len;
  }
  return Status::Ok();
}

// A full fp32 copy into the slice, checked whole before anything is written.
Status CopyFp32(std::span<const std::span<const uint8_t>> data, std::span<float> slice) {
  const size_t n = slice.size();
  const size_t data_bytes = TotalBytes(data);
  if (data_bytes != 4 * n) {
    return DataLoss("pulled fp32 copy has " + std::to_string(data_bytes) + " bytes; expected " +
                    std::to_string(4 * n));
  }
  LOCO_RETURN_IF_ERROR(CheckFullCopy(data, n, 4));
  auto* out = reinterpret_cast<uint8_t*>(slice.data());
  for (const auto& piece : data) {
    if (piece.empty()) continue;
    std::memcpy(out, piece.data(), piece.size());
    out += piece.size();
  }
  return Status::Ok();
}

// A full bf16 copy, widened into the slice, checked whole before anything
// is written.
Status CopyBf16(std::span<const std::span<const uint8_t>> data, std::span<float> slice) {
  const size_t n = slice.size();
  const size_t data_bytes = TotalBytes(data);
  if (data_bytes != 2 * n) {
    return DataLoss("pulled bf16 copy has " + std::to_string(data_bytes) + " bytes; expected " +
                    std::to_string(2 * n));
  }
  LOCO_RETURN_IF_ERROR(CheckFullCopy(data, n, 2));
  PieceReader reader(data);
  std::vector<uint8_t> gathered;
  std::vector<uint16_t> aligned;
  for (size_t i = 0; i < n; i += kCopyChunk) {
    const size_t len = std::min(kCopyChunk, n - i);
    const uint8_t* bytes = reader.Next(2 * len, &gathered);
    const auto* half = reinterpret_cast<const uint16_t*>(bytes);
    if (reinterpret_cast<uintptr_t>(bytes) % alignof(uint16_t) != 0) {
      aligned.resize(len);
      std::memcpy(aligned.data(), bytes, 2 * len);
      half = aligned.data();
    }
    cpu::CastBf16ToFp32(half, len, slice.data() + i);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<size_t> ApplyPulledParams(const PulledParamsView& pulled, uint64_t offset,
                                   bool have_any, uint64_t have_version,
                                   std::span<float> slice) {
  const v1::Payload& p = pulled.header->params();
  const size_t n = slice.size();
  if (p.offset() != offset || p.length() != n) {
    return DataLoss("pulled payload covers [" + std::to_string(p.offset()) + ", +" +
                    std::to_string(p.length()) + "); expected the shard's range [" +
                    std::to_string(offset) + ", +" + std::to_string(n) + ")");
  }
  const size_t wire = TotalBytes(pulled.data) + pulled.scales.size();
  if (pulled.header->is_delta()) {
    StatusOr<std::vector<float>> scales = CheckedDeltaScales(pulled, n, have_any, have_version);
    if (!scales.ok()) return scales.status();
    // Validated: from here nothing can fail, so the slice is written in place.
    LOCO_RETURN_IF_ERROR(AddDelta(pulled, scales.value(), slice));
    return wire;
  }
  if (p.codec() == v1::CODEC_FP32) {
    LOCO_RETURN_IF_ERROR(CopyFp32(pulled.data, slice));
    return wire;
  }
  if (p.codec() == v1::CODEC_BF16) {
    LOCO_RETURN_IF_ERROR(CopyBf16(pulled.data, slice));
    return wire;
  }
  return DataLoss("pulled full copy has codec " + v1::Codec_Name(p.codec()) +
                  "; expected CODEC_FP32 or CODEC_BF16");
}

StatusOr<size_t> ApplyPulledParams(const v1::PullResponse& response, uint64_t offset,
                                   bool have_any, uint64_t have_version,
                                   std::span<float> slice) {
  const std::string& data = response.params().data();
  const std::string& scales = response.params().scales();
  const std::span<const uint8_t> piece(reinterpret_cast<const uint8_t*>(data.data()),
                                       data.size());
  PulledParamsView view;
  view.header = &response;
  view.scales = {reinterpret_cast<const uint8_t*>(scales.data()), scales.size()};
  view.data = {&piece, 1};
  return ApplyPulledParams(view, offset, have_any, have_version, slice);
}

}  // namespace loco

// Fuzz target: bytes -> the chunks of a pull answered in parts
// (PullStream) -> PulledParts, reading each chunk from its received bytes
// in slices, against protobuf's parser feeding a second PulledParts and
// against an independent model of which answer bytes the chunks covered.
//
// Input: byte 0 sets the slice size (1 + byte 0); then chunks, each a
// 2-byte little-endian length and that many bytes of a serialized
// PullChunk. The shard holds 1000 elements.
// Invariants (a violation aborts, which libFuzzer reports as a crash):
// * no crash, no sanitizer report, whatever the bytes;
// * what the reader accepts, protobuf parses and the parsed chunk is
//   accepted too; what protobuf refuses, the reader refuses (DataLoss);
// * both assemblers end in the same state: same header, same bytes;
// * Finish accepts only when every byte of data and scales was placed
//   exactly once (the model), and then the answer's bytes are the ones the
//   chunks carried.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "client/pulled_parts.h"
#include "fuzz/require.h"

namespace {

constexpr uint64_t kShard = 1000;

using loco::fuzz::Require;

std::string Bytes(const loco::PulledParts& p, bool data) {
  const loco::PulledParamsView v = p.view();
  if (!data) return std::string(reinterpret_cast<const char*>(v.scales.data()), v.scales.size());
  std::string out;
  for (const auto& piece : v.data) out.append(reinterpret_cast<const char*>(piece.data()), piece.size());
  return out;
}

// The model: the answer's bytes as the accepted chunks wrote them, and how
// many times each byte was written.
struct Model {
  std::string data, scales;
  std::vector<int> data_hits, scales_hits;
  void Place(const std::string& piece, uint64_t offset, std::string* buf, std::vector<int>* hits) {
    for (size_t i = 0; i < piece.size(); ++i) {
      (*buf)[offset + i] = piece[i];
      ++(*hits)[offset + i];
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  const size_t slice = 1 + bytes[0];
  loco::PulledParts raw, parsed;
  raw.Reset(kShard);
  parsed.Reset(kShard);
  Model model;
  bool failed = false;
  size_t at = 1;
  for (int chunks = 0; chunks < 64 && at + 2 <= size && !failed; ++chunks) {
    const size_t len = std::min<size_t>(bytes[at] | (bytes[at + 1] << 8), size - at - 2);
    const std::string wire(reinterpret_cast<const char*>(bytes) + at + 2, len);
    at += 2 + len;
    std::vector<grpc::Slice> slices;
    for (size_t s = 0; s < wire.size(); s += slice) {
      slices.emplace_back(wire.data() + s, std::min(slice, wire.size() - s));
    }
    const loco::Status got = raw.Add(grpc::ByteBuffer(slices.data(), slices.size()));
    loco::v1::PullChunk chunk;
    const bool parses = chunk.ParseFromString(wire);
    if (!parses) {
      Require(!got.ok(), "the reader accepted what protobuf refuses");
      failed = true;
      break;
    }
    if (got.code() == loco::StatusCode::kDataLoss) {
      // Refused on the wire format alone: only a group, which protobuf
      // skips as an unknown field, may be refused here and parsed there.
      failed = true;
      break;
    }
    const loco::Status want = parsed.Add(chunk);
    Require(got.ok() == want.ok(), "the reader and the parsed chunk got different verdicts");
    if (!got.ok()) {
      failed = true;
      break;
    }
    if (raw.chunks() == 1) {
      const std::string d = Bytes(raw, true), s = Bytes(raw, false);
      model.data.assign(d.size(), '\0');
      model.scales.assign(s.size(), '\0');
      model.data_hits.assign(d.size(), 0);
      model.scales_hits.assign(s.size(), 0);
    }
    model.Place(chunk.data(), chunk.data_offset(), &model.data, &model.data_hits);
    model.Place(chunk.scales(), chunk.scales_offset(), &model.scales, &model.scales_hits);
  }
  if (failed || raw.chunks() == 0) return 0;
  Require(raw.header().SerializeAsString() == parsed.header().SerializeAsString(),
          "the reader and the parsed chunks read different headers");
  const bool finished = raw.Finish().ok();
  Require(finished == parsed.Finish().ok(), "the two assemblers finished differently");
  bool exact = true;
  for (int h : model.data_hits) exact = exact && h == 1;
  for (int h : model.scales_hits) exact = exact && h == 1;
  for (int h : model.data_hits) Require(h <= 1, "a data byte was placed twice");
  for (int h : model.scales_hits) Require(h <= 1, "a scales byte was placed twice");
  Require(finished == exact, "Finish disagrees with the model about the coverage");
  if (finished) {
    Require(Bytes(raw, true) == model.data && Bytes(raw, false) == model.scales,
            "the answer's bytes are not the chunks' bytes");
    Require(Bytes(parsed, true) == model.data, "the parsed chunks made other bytes");
  }
  return 0;
}

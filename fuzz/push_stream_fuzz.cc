// Fuzz target: bytes -> a stream of v1::PushChunk -> PushAssembler, the
// server's reassembly of a chunked push (in order or placed).
//
// Input: a sequence of [2-byte little-endian length L][L bytes of one
// PushChunk]; a chunk that does not parse ends the stream.
//
// Invariants (a violation aborts, which libFuzzer reports as a crash):
// * no crash, no sanitizer report, whatever the bytes;
// * a refusal has a message, and every later Add and Finish repeats it;
// * an accepted placed stream equals an independent model of it: its
//   pieces lie inside buffers of the sizes the header implies, never
//   overlap, cover them exactly, and the assembled bytes are the pieces'
//   bytes at their offsets;
// * an accepted in-order stream's data is its chunks' data, concatenated.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz/require.h"
#include "kernels/quantize.h"
#include "server/push_assembler.h"

namespace {

constexpr size_t kMaxDataBytes = 4 * 1000;  // a 1000-element shard

using loco::fuzz::Require;

// One buffer of the model: its bytes and which of them a piece wrote.
struct ModelBuffer {
  std::string bytes;
  std::vector<bool> written;
  void Size(size_t n) {
    bytes.assign(n, '\0');
    written.assign(n, false);
  }
  void Place(uint64_t offset, const std::string& piece) {
    if (piece.empty()) return;
    Require(offset <= bytes.size() && piece.size() <= bytes.size() - offset,
            "an accepted piece lies outside its buffer");
    for (size_t i = 0; i < piece.size(); ++i) {
      Require(!written[offset + i], "accepted pieces overlap");
      written[offset + i] = true;
      bytes[offset + i] = piece[i];
    }
  }
  bool Covered() const {
    for (bool w : written) {
      if (!w) return false;
    }
    return true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loco::PushAssembler assembler(kMaxDataBytes);
  std::vector<loco::v1::PushChunk> chunks;
  size_t at = 0;
  while (at + 2 <= size && chunks.size() < 64) {
    const size_t len = data[at] | (size_t{data[at + 1]} << 8);
    at += 2;
    if (len > size - at) break;
    loco::v1::PushChunk chunk;
    if (!chunk.ParseFromArray(data + at, static_cast<int>(len))) break;
    at += len;
    chunks.push_back(std::move(chunk));
  }
  if (chunks.empty()) return 0;

  const bool placed = chunks[0].placed();
  ModelBuffer model_data, model_scales;
  std::string in_order;
  loco::Status refused = loco::Status::Ok();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const loco::v1::PushChunk copy = chunks[i];
    loco::v1::PushChunk chunk = chunks[i];
    loco::Status s = assembler.Add(&chunk);
    if (!refused.ok()) {
      Require(!s.ok() && s.message() == refused.message(),
              "a refused stream accepted a later chunk, or changed its message");
      continue;
    }
    if (!s.ok()) {
      Require(!s.message().empty(), "a refusal without a message");
      refused = s;
      continue;
    }
    if (i == 0 && placed) {
      const loco::v1::Payload& g = copy.header().gradient();
      const size_t n = g.length();
      switch (g.codec()) {
        case loco::v1::CODEC_FP32: model_data.Size(4 * n); break;
        case loco::v1::CODEC_BF16: model_data.Size(2 * n); break;
        default:
          model_data.Size(loco::PackedBytes(n, static_cast<int>(g.bits())));
          model_scales.Size(4 * loco::NumBlocks(n, static_cast<int>(g.block_size())));
      }
    }
    if (placed) {
      model_data.Place(copy.data_offset(), copy.data());
      model_scales.Place(copy.scales_offset(), copy.scales());
    } else {
      in_order += copy.data();
    }
  }
  auto assembled = assembler.Finish();
  if (!refused.ok()) {
    Require(!assembled.ok() && assembled.status().message() == refused.message(),
            "Finish accepted a refused stream, or changed its message");
    return 0;
  }
  if (!assembled.ok()) {
    Require(!assembled.status().message().empty(), "a refusal without a message");
    return 0;
  }
  const loco::v1::Payload& g = assembled->gradient();
  if (placed) {
    Require(model_data.Covered() && model_scales.Covered(),
            "an accepted placed stream left bytes uncovered");
    Require(g.data() == model_data.bytes, "placed data differ from the pieces");
    Require(g.scales() == model_scales.bytes, "placed scales differ from the pieces");
  } else {
    Require(g.data() == in_order, "in-order data differ from the chunks' data");
  }
  Require(g.data().size() <= kMaxDataBytes, "more data than the shard can need");
  return 0;
}

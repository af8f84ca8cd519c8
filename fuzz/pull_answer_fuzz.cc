// Fuzz target: bytes -> a Pull answer in slices -> PulledResponse::Read and
// ApplyPulledParams over its pieces, against protobuf's parser and
// ApplyPulledParams over the parsed message.
//
// Input: byte 0 sets the slice size (1 + byte 0), the rest is the answer.
// Invariants (a violation aborts, which libFuzzer reports as a crash):
// * no crash, no sanitizer report, whatever the bytes;
// * what the reader accepts, protobuf accepts, with the same fields and body;
//   what protobuf refuses, the reader refuses;
// * applied to a worker's slice, both give the same status and the same
//   bits; a refusal leaves the slice untouched.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "client/param_payload_decoder.h"
#include "client/pulled_response.h"
#include "fuzz/require.h"

namespace {

using loco::fuzz::Require;

bool SameAnswer(const loco::PulledResponse& got, const loco::v1::PullResponse& want) {
  const loco::v1::PullResponse& h = got.header();
  std::string data;
  for (const auto& piece : got.view().data) {
    data.append(reinterpret_cast<const char*>(piece.data()), piece.size());
  }
  const auto scales = got.view().scales;
  return h.version() == want.version() && h.is_delta() == want.is_delta() &&
         h.has_params() == want.has_params() && h.params().codec() == want.params().codec() &&
         h.params().bits() == want.params().bits() &&
         h.params().block_size() == want.params().block_size() &&
         h.params().offset() == want.params().offset() &&
         h.params().length() == want.params().length() && data == want.params().data() &&
         std::string(reinterpret_cast<const char*>(scales.data()), scales.size()) ==
             want.params().scales();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + bytes[0];
  const std::string wire(reinterpret_cast<const char*>(bytes) + 1, size - 1);
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < wire.size(); at += piece) {
    slices.emplace_back(wire.data() + at, std::min(piece, wire.size() - at));
  }
  loco::PulledResponse got;
  const bool read = got.Read(grpc::ByteBuffer(slices.data(), slices.size())).ok();
  loco::v1::PullResponse want;
  const bool parsed = want.ParseFromString(wire);
  if (read) {
    Require(parsed, "the reader accepted what protobuf refuses");
    Require(SameAnswer(got, want), "the reader and protobuf read different answers");
  }
  if (!parsed) Require(!read, "protobuf refused what the reader accepted");
  if (!read) {
    Require(got.view().data.empty() && got.view().scales.empty(), "a refusal kept a body");
    return 0;
  }
  const uint64_t n = want.params().length();
  if (n > (uint64_t{1} << 16)) return 0;
  const uint64_t offset = want.params().offset();
  const uint64_t have = want.version() - 1;  // a delta's base
  std::vector<float> from_pieces(n, 0.25f), from_message(n, 0.25f);
  const auto a = loco::ApplyPulledParams(got.view(), offset, true, have, from_pieces);
  const auto b = loco::ApplyPulledParams(want, offset, true, have, from_message);
  Require(a.ok() == b.ok() && a.status().code() == b.status().code(),
          "pieces and message were applied with different statuses");
  if (a.ok()) Require(a.value() == b.value(), "pieces and message counted different wire bytes");
  Require(n == 0 || std::memcmp(from_pieces.data(), from_message.data(), 4 * n) == 0,
          "pieces and message wrote different parameters");
  if (!a.ok()) {
    for (float x : from_pieces) Require(x == 0.25f, "a refused answer changed the slice");
  }
  return 0;
}

// PulledResponse (a Pull's answer read from gRPC's slices) against
// protobuf's own parser, and ApplyPulledParams over pieces against the
// parsed message.
#include "client/pulled_response.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cast.h"
#include "kernels/quantize.h"
#include "server/pull_response_wire.h"
#include "tests/common/random_batch.h"
#include "client/param_payload_decoder.h"

namespace loco {
namespace {

// `bytes` as a ByteBuffer of slices of `piece` bytes (the last may be shorter).
grpc::ByteBuffer SlicedResponse(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    slices.emplace_back(bytes.data() + at, std::min(piece, bytes.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

v1::PullResponse Delta(size_t n, int bits, int block, uint64_t version, uint64_t seed) {
  const std::vector<float> d = Gaussian(n, seed);
  std::vector<uint8_t> codes(PackedBytes(n, bits));
  std::vector<float> scales(NumBlocks(n, block));
  QuantizeStats qs;
  EXPECT_TRUE(cpu::Quantize(d.data(), n, QuantizeParams{bits, block}, codes.data(),
                            scales.data(), &qs).ok());
  v1::PullResponse r;
  r.set_version(version);
  r.set_is_delta(true);
  v1::Payload* p = r.mutable_params();
  p->set_codec(v1::CODEC_BLOCK_QUANT);
  p->set_bits(bits);
  p->set_block_size(block);
  p->set_offset(64);
  p->set_length(n);
  p->set_data(reinterpret_cast<const char*>(codes.data()), codes.size());
  p->set_scales(reinterpret_cast<const char*>(scales.data()), 4 * scales.size());
  return r;
}

v1::PullResponse FullResponseCopy(size_t n, v1::Codec codec, uint64_t version, uint64_t seed) {
  const std::vector<float> v = Gaussian(n, seed);
  v1::PullResponse r;
  r.set_version(version);
  v1::Payload* p = r.mutable_params();
  p->set_codec(codec);
  p->set_offset(64);
  p->set_length(n);
  if (codec == v1::CODEC_BF16) {
    std::vector<uint16_t> half(n);
    cpu::CastFp32ToBf16(v.data(), n, half.data());
    p->set_data(reinterpret_cast<const char*>(half.data()), 2 * n);
  } else {
    p->set_data(reinterpret_cast<const char*>(v.data()), 4 * n);
  }
  return r;
}

// The header fields equal, and the body equals the message's.
void ExpectSameAnswer(const PulledResponse& got, const v1::PullResponse& want) {
  const v1::PullResponse& h = got.header();
  EXPECT_EQ(h.version(), want.version());
  EXPECT_EQ(h.is_delta(), want.is_delta());
  EXPECT_EQ(h.has_params(), want.has_params());
  EXPECT_EQ(h.params().codec(), want.params().codec());
  EXPECT_EQ(h.params().bits(), want.params().bits());
  EXPECT_EQ(h.params().block_size(), want.params().block_size());
  EXPECT_EQ(h.params().offset(), want.params().offset());
  EXPECT_EQ(h.params().length(), want.params().length());
  EXPECT_TRUE(h.params().data().empty());
  EXPECT_TRUE(h.params().scales().empty());
  const PulledParamsView v = got.view();
  std::string data;
  for (const auto& piece : v.data) data.append(reinterpret_cast<const char*>(piece.data()), piece.size());
  EXPECT_EQ(data, want.params().data());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(v.scales.data()), v.scales.size()),
            want.params().scales());
}

std::vector<v1::PullResponse> Answers() {
  std::vector<v1::PullResponse> out;
  out.push_back(Delta(1000, 4, 256, 7, 1));  // a partial last block
  out.push_back(Delta(1024, 2, 32, 7, 2));
  out.push_back(Delta(777, 8, 64, 7, 3));
  out.push_back(FullResponseCopy(37, v1::CODEC_FP32, 7, 4));
  out.push_back(FullResponseCopy(129, v1::CODEC_BF16, 7, 5));
  out.emplace_back();  // all defaults: an empty message
  return out;
}

// Each answer cut into slices of 1, 2, 3, 7, 64 and 1000 bytes and whole:
// the reader sees what protobuf sees, and ApplyPulledParams over its pieces
// writes the slice bit for bit as over the parsed message.
TEST(PulledResponseTest, ReadsAsProtobufAtAnySlicingAndAppliesBitForBit) {
  for (const v1::PullResponse& want : Answers()) {
    const std::string wire = want.SerializeAsString();
    const size_t n = want.params().length();
    for (size_t piece : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}, size_t{1000},
                         wire.size() + 1}) {
      SCOPED_TRACE("codec " + std::to_string(want.params().codec()) + ", slices of " +
                   std::to_string(piece));
      PulledResponse got;
      ASSERT_TRUE(got.Read(SlicedResponse(wire, piece)).ok());
      ExpectSameAnswer(got, want);
      if (n == 0) continue;
      if (piece < wire.size()) {
        EXPECT_GT(got.view().data.size(), 1u);
      }
      const std::vector<float> base = Gaussian(n, 99);
      std::vector<float> from_pieces = base, from_message = base;
      auto a = ApplyPulledParams(got.view(), 64, true, 6, from_pieces);
      auto b = ApplyPulledParams(want, 64, true, 6, from_message);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      EXPECT_EQ(*a, *b);
      ASSERT_EQ(std::memcmp(from_pieces.data(), from_message.data(), 4 * n), 0);
      EXPECT_NE(std::memcmp(from_pieces.data(), base.data(), 4 * n), 0);
    }
  }
}

// The server's zero-copy wire (header first, then the body as its own
// slices) reads as the parsed message.
TEST(PulledResponseTest, ReadsTheServersWireFormat) {
  for (const v1::PullResponse& want : Answers()) {
    if (!want.has_params()) continue;  // the server always sends a payload
    v1::PullResponse header = want;
    header.mutable_params()->clear_data();
    header.mutable_params()->clear_scales();
    ReturnPath::SharedBody body;
    body.data = std::make_shared<const std::string>(want.params().data());
    if (!want.params().scales().empty()) {
      body.scales = std::make_shared<const std::string>(want.params().scales());
    }
    PulledResponse got;
    ASSERT_TRUE(got.Read(PullResponseToWire(header, body)).ok());
    ExpectSameAnswer(got, want);
  }
}

// Fields in another order, repeated, or unknown: read as protobuf reads them
// (the last scalar wins, a second `params` merges, unknown fields skipped).
TEST(PulledResponseTest, FieldOrderRepeatsAndUnknownFieldsFollowProtobuf) {
  const v1::PullResponse a = Delta(300, 4, 64, 9, 6);
  v1::PullResponse b;
  b.set_version(11);
  b.mutable_params()->set_bits(8);  // merged into a's params: bits 8, a's data
  std::string wire = b.SerializeAsString() + a.SerializeAsString() + b.SerializeAsString();
  // Unknown fields of each wire type: 15 varint, 16 fixed64, 17 bytes, 18 fixed32.
  wire += std::string("\x78\x96\x01", 3) + std::string("\x81\x01", 2) + std::string(8, 'x') +
          std::string("\x8a\x01\x03" "abc", 6) + std::string("\x95\x01", 2) + std::string(4, 'y');
  v1::PullResponse want;
  ASSERT_TRUE(want.ParseFromString(wire));
  EXPECT_EQ(want.version(), 11u);
  EXPECT_EQ(want.params().bits(), 8u);
  PulledResponse got;
  ASSERT_TRUE(got.Read(SlicedResponse(wire, 5)).ok());
  ExpectSameAnswer(got, want);
}

// Every prefix of a valid answer and many corrupted copies: the reader
// accepts exactly what protobuf accepts (it may refuse groups, which this
// protocol never sends), reads the same fields, and leaves nothing behind
// after a refusal.
TEST(PulledResponseTest, TruncatedAndCorruptedAnswersAreRefusedAsProtobufRefusesThem) {
  const std::string wire = Delta(200, 4, 64, 3, 7).SerializeAsString();
  PulledResponse got;
  for (size_t len = 0; len <= wire.size(); ++len) {
    const std::string cut = wire.substr(0, len);
    v1::PullResponse want;
    const bool proto_ok = want.ParseFromString(cut);
    const Status s = got.Read(SlicedResponse(cut, 3));
    ASSERT_EQ(s.ok(), proto_ok) << "prefix of " << len << " bytes: " << s.ToString();
    if (proto_ok) {
      ExpectSameAnswer(got, want);
    } else {
      EXPECT_EQ(s.code(), StatusCode::kDataLoss);
      EXPECT_FALSE(got.header().has_params());
      EXPECT_TRUE(got.view().data.empty());
      EXPECT_TRUE(got.view().scales.empty());
    }
  }
  std::mt19937_64 rng(8);
  size_t refused = 0, accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bad = wire;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      // Corrupt the header bytes more often than the body: that is where
      // the structure is.
      const size_t at = rng() % 2 == 0 ? rng() % 24 : rng() % bad.size();
      bad[at] = static_cast<char>(rng());
    }
    v1::PullResponse want;
    const bool proto_ok = want.ParseFromString(bad);
    const Status s = got.Read(SlicedResponse(bad, 1 + rng() % 16));
    if (s.ok()) {
      ++accepted;
      ASSERT_TRUE(proto_ok) << "trial " << trial << ": accepted what protobuf refuses";
      ExpectSameAnswer(got, want);
    } else {
      ++refused;
      EXPECT_EQ(s.code(), StatusCode::kDataLoss);
      EXPECT_TRUE(got.view().data.empty());
    }
    if (!proto_ok) {
      ASSERT_FALSE(s.ok()) << "trial " << trial;
    }
  }
  EXPECT_GT(refused, 100u);
  EXPECT_GT(accepted, 100u);
}

// A non-finite value of a full copy in a value cut across two slices:
// refused, and the worker's slice is untouched.
TEST(PulledResponseTest, NonFiniteValueAcrossSlicesLeavesTheSliceUntouched) {
  for (v1::Codec codec : {v1::CODEC_FP32, v1::CODEC_BF16}) {
    v1::PullResponse r = FullResponseCopy(100, codec, 2, 9);
    const size_t elem = codec == v1::CODEC_FP32 ? 4 : 2;
    std::string* data = r.mutable_params()->mutable_data();
    const float inf = std::numeric_limits<float>::infinity();
    uint16_t inf16;
    cpu::CastFp32ToBf16(&inf, 1, &inf16);
    std::memcpy(data->data() + 61 * elem, elem == 4 ? static_cast<const void*>(&inf)
                                                    : static_cast<const void*>(&inf16), elem);
    PulledResponse got;
    ASSERT_TRUE(got.Read(SlicedResponse(r.SerializeAsString(), 5)).ok());
    std::vector<float> slice(100, 1.5f);
    const auto applied = ApplyPulledParams(got.view(), 64, true, 1, slice);
    EXPECT_EQ(applied.status().code(), StatusCode::kDataLoss) << applied.status().ToString();
    EXPECT_NE(applied.status().message().find("element 61"), std::string::npos)
        << applied.status().ToString();
    EXPECT_EQ(slice, std::vector<float>(100, 1.5f));
  }
}

}  // namespace
}  // namespace loco

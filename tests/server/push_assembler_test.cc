// PushAssembler: chunks put back together give the request a unary Push
// would have carried, byte for byte, whatever the chunk size; a malformed
// stream is refused at its first bad chunk, and stays refused. The same for
// placed streams, whose pieces may come in any order.
#include "server/push_assembler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tests/server/reference.h"

namespace loco::test {
namespace {

constexpr size_t kAssemblerLength = 1000;

v1::PushRequest Request() {
  v1::PushRequest req;
  req.set_worker_id(3);
  req.set_shard_id(1);
  req.set_step(17);
  *req.mutable_gradient() = QuantPayload(RandomVector(kAssemblerLength, 5), 0, 4, 128);
  return req;
}

// `req` cut as SendPushInChunks cuts it.
std::vector<v1::PushChunk> Cut(const v1::PushRequest& req, size_t chunk_bytes) {
  std::vector<v1::PushChunk> chunks;
  const std::string& data = req.gradient().data();
  size_t sent = 0;
  do {
    v1::PushChunk c;
    if (chunks.empty()) {
      *c.mutable_header() = req;
      c.mutable_header()->mutable_gradient()->clear_data();
    }
    const size_t n = std::min(chunk_bytes, data.size() - sent);
    c.set_data(data.substr(sent, n));
    sent += n;
    chunks.push_back(std::move(c));
  } while (sent < data.size());
  return chunks;
}

TEST(PushAssembler, ChunksOfAnySizeGiveTheUnaryRequestByteForByte) {
  const v1::PushRequest req = Request();
  for (const size_t chunk : {size_t{1}, size_t{3}, size_t{64}, size_t{499}, size_t{500},
                             size_t{1} << 20}) {
    SCOPED_TRACE(chunk);
    PushAssembler assembler(4 * kAssemblerLength);
    std::vector<v1::PushChunk> chunks = Cut(req, chunk);
    EXPECT_EQ(chunks.size(), (req.gradient().data().size() + chunk - 1) / chunk);
    for (v1::PushChunk& c : chunks) ASSERT_TRUE(assembler.Add(&c).ok());
    auto assembled = assembler.Finish();
    ASSERT_TRUE(assembled.ok()) << assembled.status().ToString();
    EXPECT_EQ(assembled->SerializeAsString(), req.SerializeAsString());
  }
}

// A withdrawal (no gradient) sent as a stream of its header alone gives the
// unary withdrawal: no gradient appears on the way, so the shard takes it
// as one instead of refusing a withdrawal that carries a gradient.
TEST(PushAssembler, AWithdrawalStreamGivesTheUnaryWithdrawal) {
  v1::PushRequest req;
  req.set_worker_id(3);
  req.set_shard_id(1);
  req.set_step(17);
  req.set_withdraw(true);
  PushAssembler assembler(4 * kAssemblerLength);
  v1::PushChunk header;
  *header.mutable_header() = req;
  ASSERT_TRUE(assembler.Add(&header).ok());
  auto assembled = assembler.Finish();
  ASSERT_TRUE(assembled.ok()) << assembled.status().ToString();
  EXPECT_FALSE(assembled->has_gradient());
  EXPECT_EQ(assembled->SerializeAsString(), req.SerializeAsString());
}

TEST(PushAssembler, MalformedStreamsAreRefusedAtTheBadChunkAndStayRefused) {
  const v1::PushRequest req = Request();
  struct Case {
    std::string what;
    std::vector<v1::PushChunk> chunks;
    size_t bad;            // index of the chunk that is refused
    std::string message;   // part of the refusal
    size_t bound = 4 * kAssemblerLength;
  };
  std::vector<Case> cases;
  {
    auto c = Cut(req, 100);
    c[0].clear_header();
    cases.push_back({"no header", c, 0, "push chunk 0 has no header"});
  }
  {
    auto c = Cut(req, 100);
    c[0].mutable_header()->mutable_gradient()->set_data("x");
    cases.push_back({"data in the header", c, 0, "header carries 1 bytes of gradient data"});
  }
  {
    auto c = Cut(req, 100);
    *c[2].mutable_header() = *c[0].mutable_header();
    cases.push_back({"second header", c, 2, "push chunk 2 carries a header"});
  }
  {
    auto c = Cut(req, 100);
    c[1].clear_data();
    cases.push_back({"empty later chunk", c, 1, "push chunk 1 carries no data"});
  }
  {
    // 4-bit data of 1000 elements is 500 bytes; the bound here is 450.
    cases.push_back({"over the bound", Cut(req, 100), 4, "passes 450 bytes at push chunk 4", 450});
  }
  for (Case& c : cases) {
    SCOPED_TRACE(c.what);
    PushAssembler assembler(c.bound);
    for (size_t i = 0; i < c.bad; ++i) ASSERT_TRUE(assembler.Add(&c.chunks[i]).ok());
    const Status refused = assembler.Add(&c.chunks[c.bad]);
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.message().find(c.message), std::string::npos) << refused.ToString();
    // Every later chunk, valid or not, and the result: the same refusal.
    v1::PushChunk more;
    more.set_data("y");
    EXPECT_EQ(assembler.Add(&more).message(), refused.message());
    EXPECT_EQ(assembler.Finish().status().message(), refused.message());
  }
  PushAssembler empty(4 * kAssemblerLength);
  EXPECT_EQ(empty.Finish().status().code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------- placed

v1::PushRequest RequestWith(v1::Payload gradient) {
  v1::PushRequest req = Request();
  *req.mutable_gradient() = std::move(gradient);
  return req;
}

// The first chunk of a placed stream for `req`: its header without data or
// scales.
v1::PushChunk PlacedHeader(const v1::PushRequest& req) {
  v1::PushChunk c;
  *c.mutable_header() = req;
  c.mutable_header()->mutable_gradient()->clear_data();
  c.mutable_header()->mutable_gradient()->clear_scales();
  c.set_placed(true);
  return c;
}

v1::PushChunk Piece(const std::string& data, uint64_t data_offset, const std::string& scales = "",
                    uint64_t scales_offset = 0) {
  v1::PushChunk c;
  c.set_data(data);
  c.set_data_offset(data_offset);
  c.set_scales(scales);
  c.set_scales_offset(scales_offset);
  return c;
}

// Chunks (no header) covering `req`'s data and scales: chunk i carries the
// i-th data piece and the i-th scales piece (when there are that many),
// their sizes cycling through `sizes`.
std::vector<v1::PushChunk> PlacedPieces(const v1::PushRequest& req,
                                        const std::vector<size_t>& sizes) {
  std::vector<v1::PushChunk> chunks;
  const auto cut = [&](const std::string& bytes, bool scales) {
    size_t at = 0;
    for (size_t i = 0; at < bytes.size(); ++i) {
      const size_t n = std::min(sizes[i % sizes.size()], bytes.size() - at);
      if (chunks.size() <= i) chunks.emplace_back();
      if (scales) {
        chunks[i].set_scales(bytes.substr(at, n));
        chunks[i].set_scales_offset(at);
      } else {
        chunks[i].set_data(bytes.substr(at, n));
        chunks[i].set_data_offset(at);
      }
      at += n;
    }
  };
  cut(req.gradient().data(), false);
  cut(req.gradient().scales(), true);
  return chunks;
}

TEST(PushAssembler, PlacedPiecesInAnyOrderGiveTheUnaryRequestByteForByte) {
  const std::vector<float> values = RandomVector(kAssemblerLength, 9);
  struct Codec {
    std::string what;
    v1::PushRequest req;
  };
  const std::vector<Codec> codecs = {
      {"4-bit", RequestWith(QuantPayload(values, 0, 4, 128))},
      {"8-bit", RequestWith(QuantPayload(values, 0, 8, 64))},
      {"2-bit", RequestWith(QuantPayload(values, 0, 2, 32))},
      {"fp32", RequestWith(Fp32Payload(values, 0))},
  };
  // Odd sizes, so that pieces cross block and element boundaries.
  const std::vector<std::vector<size_t>> cuts = {
      {1}, {7}, {13, 1, 250}, {3, 97}, {size_t{1} << 20}};
  std::mt19937 rng(42);
  for (const Codec& codec : codecs) {
    SCOPED_TRACE(codec.what);
    ASSERT_EQ(codec.req.gradient().scales().empty(), codec.what == "fp32");
    for (const auto& sizes : cuts) {
      SCOPED_TRACE(sizes[0]);
      for (const std::string order : {"descending", "shuffled", "descending, first in header"}) {
        SCOPED_TRACE(order);
        std::vector<v1::PushChunk> pieces = PlacedPieces(codec.req, sizes);
        if (order == "shuffled") {
          std::shuffle(pieces.begin(), pieces.end(), rng);
        } else {
          std::reverse(pieces.begin(), pieces.end());  // the end of the shard first
        }
        std::vector<v1::PushChunk> chunks = {PlacedHeader(codec.req)};
        if (order == "descending, first in header") {
          v1::PushChunk& first = chunks[0];
          first.set_data(pieces[0].data());
          first.set_data_offset(pieces[0].data_offset());
          first.set_scales(pieces[0].scales());
          first.set_scales_offset(pieces[0].scales_offset());
          pieces.erase(pieces.begin());
        }
        chunks.insert(chunks.end(), pieces.begin(), pieces.end());
        PushAssembler assembler(4 * kAssemblerLength);
        for (v1::PushChunk& c : chunks) ASSERT_TRUE(assembler.Add(&c).ok());
        EXPECT_EQ(assembler.chunks(), chunks.size());
        auto assembled = assembler.Finish();
        ASSERT_TRUE(assembled.ok()) << assembled.status().ToString();
        EXPECT_EQ(assembled->SerializeAsString(), codec.req.SerializeAsString());
      }
    }
  }
}

TEST(PushAssembler, MalformedPlacedStreamsAreRefusedAtTheBadChunkAndStayRefused) {
  // 4-bit, block 128, 1000 elements: 500 data bytes, 8 scales (32 bytes).
  const v1::PushRequest req = Request();
  ASSERT_EQ(req.gradient().data().size(), 500u);
  ASSERT_EQ(req.gradient().scales().size(), 32u);
  const std::string& data = req.gradient().data();
  const std::string& scales = req.gradient().scales();
  const auto header = [&](const std::function<void(v1::Payload*)>& f) {
    v1::PushChunk c = PlacedHeader(req);
    f(c.mutable_header()->mutable_gradient());
    return c;
  };
  const v1::PushChunk ok_header = PlacedHeader(req);
  const v1::PushChunk a = Piece(data.substr(100, 100), 100);  // data [100, 200)
  v1::PushChunk in_order = ok_header;
  in_order.set_placed(false);
  in_order.mutable_header()->mutable_gradient()->set_scales(scales);
  constexpr size_t kAtFinish = ~size_t{0};
  struct Case {
    std::string what;
    std::vector<v1::PushChunk> chunks;
    size_t bad;           // index of the refused chunk, or kAtFinish
    std::string message;  // part of the refusal
  };
  const std::vector<Case> cases = {
      // The header.
      {"data in the header", {header([](v1::Payload* g) { g->set_data("xy"); })}, 0,
       "push chunk 0's header carries 2 bytes of gradient data"},
      {"scales in the header", {header([&](v1::Payload* g) { g->set_scales(scales); })}, 0,
       "push chunk 0's placed header carries 32 bytes of gradient scales"},
      {"no codec", {header([](v1::Payload* g) { g->set_codec(v1::CODEC_UNSPECIFIED); })}, 0,
       "placed header has codec 0; a placed push needs CODEC_FP32"},
      {"bits 3", {header([](v1::Payload* g) { g->set_bits(3); })}, 0,
       "has bits 3; expected 2, 4 or 8"},
      {"block 100", {header([](v1::Payload* g) { g->set_block_size(100); })}, 0,
       "has block_size 100; expected a multiple of 32 in [32, 4096]"},
      {"block 0", {header([](v1::Payload* g) { g->set_block_size(0); })}, 0, "has block_size 0"},
      {"block 8192", {header([](v1::Payload* g) { g->set_block_size(8192); })}, 0,
       "has block_size 8192"},
      {"length 0", {header([](v1::Payload* g) { g->set_length(0); })}, 0,
       "has length 0; a placed push needs a length in [1, 1000]"},
      {"length over the bound", {header([](v1::Payload* g) { g->set_length(1001); })}, 0,
       "has length 1001"},
      {"length 2^64-1", {header([](v1::Payload* g) { g->set_length(~uint64_t{0}); })}, 0,
       "has length 18446744073709551615"},
      // Later chunks.
      {"second header",
       {ok_header, a,
        [&] {
          auto c = Piece("x", 0);
          *c.mutable_header() = req;
          return c;
        }()},
       2, "push chunk 2 carries a header"},
      {"placed again", {ok_header, [] { auto c = Piece("x", 0); c.set_placed(true); return c; }()},
       1, "push chunk 1 sets placed; only the first chunk may"},
      {"empty piece", {ok_header, a, Piece("", 0)}, 2,
       "push chunk 2 carries neither data nor scales"},
      {"data past the end", {ok_header, Piece(data.substr(490), 491)}, 1,
       "push chunk 1 puts 10 data bytes at offset 491, past the 500 bytes"},
      {"data at the end", {ok_header, Piece("x", 500)}, 1, "1 data bytes at offset 500"},
      {"offset overflowing", {ok_header, Piece("xy", ~uint64_t{0})}, 1,
       "2 data bytes at offset 18446744073709551615"},
      {"scales past the end", {ok_header, Piece("", 0, scales.substr(0, 8), 28)}, 1,
       "puts 8 scales bytes at offset 28, past the 32 bytes"},
      {"same piece twice", {ok_header, a, a}, 2,
       "push chunk 2's data [100, 200) overlaps data bytes [100, 200) already placed"},
      {"one byte into the end", {ok_header, a, Piece(data.substr(199, 51), 199)}, 2,
       "data [199, 250) overlaps data bytes [100, 200)"},
      {"one byte into the start", {ok_header, a, Piece(data.substr(0, 101), 0)}, 2,
       "data [0, 101) overlaps data bytes [100, 200)"},
      {"inside", {ok_header, a, Piece(data.substr(150, 1), 150)}, 2, "data [150, 151) overlaps"},
      {"around", {ok_header, a, Piece(data, 0)}, 2, "data [0, 500) overlaps"},
      {"between merged pieces",
       {ok_header, a, Piece(data.substr(300, 10), 300), Piece(data.substr(200, 101), 200)}, 3,
       "data [200, 301) overlaps data bytes [300, 310)"},
      {"scales overlap",
       {ok_header, Piece("", 0, scales.substr(4, 8), 4), Piece("", 0, scales.substr(0, 5), 0)}, 2,
       "push chunk 2's scales [0, 5) overlaps scales bytes [4, 12)"},
      {"header's piece overlapped",
       {[&] { auto c = ok_header; c.set_data(data.substr(0, 10)); return c; }(),
        Piece(data.substr(9, 1), 9)},
       1, "data [9, 10) overlaps data bytes [0, 10)"},
      // In order: the placed fields are refused.
      {"in order, data_offset", {in_order, Piece(data.substr(0, 10), 10)}, 1,
       "push chunk 1 sets data_offset, which only a placed push may"},
      {"in order, scales", {in_order, Piece(data, 0, "abcd", 0)}, 1, "push chunk 1 sets scales,"},
      {"in order, scales_offset", {in_order, Piece(data, 0, "", 4)}, 1,
       "push chunk 1 sets scales_offset,"},
      {"in order, first chunk's data_offset",
       {[&] { auto c = in_order; c.set_data(data); c.set_data_offset(1); return c; }()}, 0,
       "push chunk 0 sets data_offset"},
      {"in order, placed later",
       {in_order,
        [&] {
          auto c = Piece(data, 0);
          c.set_placed(true);
          return c;
        }()},
       1, "push chunk 1 sets placed"},
      // Finish: bytes left uncovered.
      {"header only", {ok_header}, kAtFinish, "the placed push covered 0 of 500 data bytes"},
      {"a data piece missing",
       [&] {
         auto c = PlacedPieces(req, {13});
         c.erase(c.begin() + 5);  // data [65, 78)
         c.insert(c.begin(), ok_header);
         return c;
       }(),
       kAtFinish, "the placed push covered 487 of 500 data bytes"},
      {"a scales piece missing",
       [&] {
         auto c = PlacedPieces(req, {13});
         c[2].clear_scales();  // scales [26, 32)
         c.insert(c.begin(), ok_header);
         return c;
       }(),
       kAtFinish, "the placed push covered 26 of 32 scales bytes"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.what);
    std::vector<v1::PushChunk> chunks = tc.chunks;
    PushAssembler assembler(4 * kAssemblerLength);
    const size_t good = std::min(tc.bad, chunks.size());
    for (size_t i = 0; i < good; ++i) ASSERT_TRUE(assembler.Add(&chunks[i]).ok()) << i;
    const Status refused = tc.bad < chunks.size() ? assembler.Add(&chunks[tc.bad])
                                                  : assembler.Finish().status();
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.message().find(tc.message), std::string::npos) << refused.ToString();
    // Every later chunk, valid or not, and the result: the same refusal.
    v1::PushChunk more = Piece(data.substr(400, 1), 400);
    EXPECT_EQ(assembler.Add(&more).message(), refused.message());
    EXPECT_EQ(assembler.Finish().status().message(), refused.message());
    EXPECT_EQ(assembler.Finish().status().message(), refused.message());
  }
}

// A header announcing a huge length must not make the assembler reserve
// (or overflow computing) more than its bound.
TEST(PushAssembler, AHugeAnnouncedLengthReservesNoMoreThanTheBound) {
  v1::PushRequest req = Request();
  req.mutable_gradient()->set_length(~uint64_t{0});
  std::vector<v1::PushChunk> chunks = Cut(req, 100);
  PushAssembler assembler(4 * kAssemblerLength);
  for (v1::PushChunk& c : chunks) ASSERT_TRUE(assembler.Add(&c).ok());
  auto assembled = assembler.Finish();
  ASSERT_TRUE(assembled.ok());
  EXPECT_LE(assembled->gradient().data().capacity(), 4 * kAssemblerLength + 64);
  EXPECT_EQ(assembled->gradient().length(), ~uint64_t{0});  // the push's check refuses it
}

// ---------------------------------------------------------------- buffers

// A spare of a closed step, its bytes left over from that step's push.
std::vector<std::string> StaleSpare(size_t bytes) { return {std::string(bytes, '\x5a')}; }

TEST(PushAssembler, APushAssemblesIntoASpareBufferAndGivesTheSameRequest) {
  const std::vector<float> values = RandomVector(kAssemblerLength, 11);
  for (const bool placed : {true, false}) {
    SCOPED_TRACE(placed ? "placed" : "in order");
    const v1::PushRequest req = RequestWith(Fp32Payload(values, 0));
    const size_t bytes = req.gradient().data().size();
    PayloadBuffers buffers;
    std::vector<std::string> spare = StaleSpare(bytes);
    const char* spare_data = spare[0].data();
    buffers.Recycle(std::move(spare));
    std::vector<v1::PushChunk> chunks;
    if (placed) {
      chunks = PlacedPieces(req, {333});
      std::reverse(chunks.begin(), chunks.end());
      chunks.insert(chunks.begin(), PlacedHeader(req));
    } else {
      chunks = Cut(req, 333);
    }
    PushAssembler assembler(4 * kAssemblerLength, &buffers);
    for (v1::PushChunk& c : chunks) ASSERT_TRUE(assembler.Add(&c).ok());
    EXPECT_EQ(buffers.spares(), 0u);
    auto assembled = assembler.Finish();
    ASSERT_TRUE(assembled.ok()) << assembled.status().ToString();
    EXPECT_EQ(assembled->gradient().data().data(), spare_data);  // no new allocation
    EXPECT_EQ(assembled->SerializeAsString(), req.SerializeAsString());
  }
}

// A spare holds the bytes of an earlier push: a placed push that does not
// cover all of its buffer is refused, so none of them reaches a payload.
TEST(PushAssembler, APlacedPushThatLeavesSpareBytesUncoveredIsRefused) {
  const v1::PushRequest req = RequestWith(Fp32Payload(RandomVector(kAssemblerLength, 12), 0));
  PayloadBuffers buffers;
  buffers.Recycle(StaleSpare(req.gradient().data().size()));
  std::vector<v1::PushChunk> chunks = PlacedPieces(req, {400});
  chunks.pop_back();  // the last 3200 bytes never come
  chunks.insert(chunks.begin(), PlacedHeader(req));
  PushAssembler assembler(4 * kAssemblerLength, &buffers);
  for (v1::PushChunk& c : chunks) ASSERT_TRUE(assembler.Add(&c).ok());
  const Status refused = assembler.Finish().status();
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("the placed push covered 3600 of 4000 data bytes"),
            std::string::npos)
      << refused.ToString();
}

}  // namespace
}  // namespace loco::test

// PushAssembler: chunks put back together give the request a unary Push
// would have carried, byte for byte, whatever the chunk size; a malformed
// stream is refused at its first bad chunk, and stays refused.
#include "server/push_assembler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/server/reference.h"

namespace loco::test {
namespace {

constexpr size_t kLength = 1000;

v1::PushRequest Request() {
  v1::PushRequest req;
  req.set_worker_id(3);
  req.set_shard_id(1);
  req.set_step(17);
  *req.mutable_gradient() = QuantPayload(RandomVector(kLength, 5), 0, 4, 128);
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
    PushAssembler assembler(4 * kLength);
    std::vector<v1::PushChunk> chunks = Cut(req, chunk);
    EXPECT_EQ(chunks.size(), (req.gradient().data().size() + chunk - 1) / chunk);
    for (v1::PushChunk& c : chunks) ASSERT_TRUE(assembler.Add(&c).ok());
    auto assembled = assembler.Finish();
    ASSERT_TRUE(assembled.ok()) << assembled.status().ToString();
    EXPECT_EQ(assembled->SerializeAsString(), req.SerializeAsString());
  }
}

TEST(PushAssembler, MalformedStreamsAreRefusedAtTheBadChunkAndStayRefused) {
  const v1::PushRequest req = Request();
  struct Case {
    std::string what;
    std::vector<v1::PushChunk> chunks;
    size_t bad;            // index of the chunk that is refused
    std::string message;   // part of the refusal
    size_t bound = 4 * kLength;
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
  PushAssembler empty(4 * kLength);
  EXPECT_EQ(empty.Finish().status().code(), StatusCode::kInvalidArgument);
}

// A header announcing a huge length must not make the assembler reserve
// (or overflow computing) more than its bound.
TEST(PushAssembler, AHugeAnnouncedLengthReservesNoMoreThanTheBound) {
  v1::PushRequest req = Request();
  req.mutable_gradient()->set_length(~uint64_t{0});
  std::vector<v1::PushChunk> chunks = Cut(req, 100);
  PushAssembler assembler(4 * kLength);
  for (v1::PushChunk& c : chunks) ASSERT_TRUE(assembler.Add(&c).ok());
  auto assembled = assembler.Finish();
  ASSERT_TRUE(assembled.ok());
  EXPECT_LE(assembled->gradient().data().capacity(), 4 * kLength + 64);
  EXPECT_EQ(assembled->gradient().length(), ~uint64_t{0});  // the push's check refuses it
}

}  // namespace
}  // namespace loco::test

// The pull answer's wire bytes (PullResponseToWire): they parse as the same
// PullResponse that copying the body into the message gives, for every codec
// of the return path, and the body goes out as a slice of the shared copy,
// referenced, not copied.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/support/slice.h>

#include "server/pull_response_wire.h"
#include "server/return_path.h"
#include "tests/server/reference.h"

namespace loco::test {
namespace {

constexpr uint64_t kLength = 1000;  // several delta blocks and a partial one
constexpr ShardRange kRange{4000, kLength};

std::string Join(const grpc::ByteBuffer& buffer, std::vector<grpc::Slice>* slices) {
  EXPECT_TRUE(buffer.Dump(slices).ok());
  std::string joined;
  for (const grpc::Slice& s : *slices) {
    joined.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return joined;
}

struct Case {
  PullCodec codec;
  bool have_any;       // false: a forced full copy
  bool expect_delta;
};

class PullResponseWire : public ::testing::TestWithParam<Case> {};

TEST_P(PullResponseWire, ParsesAsTheCopiedMessageAndSharesTheBody) {
  const Case c = GetParam();
  ReturnPathOptions o;
  o.codec = c.codec;
  o.bits = 4;
  o.block_size = 128;
  o.full_sync_every = 0;
  ReturnPath path(o);
  std::vector<float> params = RandomVector(kLength, 1);
  path.Reset(params, 0);
  params = RandomVector(kLength, 2);
  path.OnApplying();
  ASSERT_TRUE(path.OnApplied(params, 1).ok());

  v1::PullRequest req;
  req.set_have_any(c.have_any);
  req.set_have_version(0);
  v1::PullResponse header;
  const ReturnPath::SharedBody body = path.Encode(req, params, 1, kRange, &header);
  ASSERT_NE(body.data, nullptr);
  EXPECT_EQ(header.is_delta(), c.expect_delta);
  EXPECT_TRUE(header.params().data().empty());
  EXPECT_EQ(body.scales != nullptr, c.expect_delta);

  v1::PullResponse copied = header;
  ReturnPath::Attach(body, &copied);

  const long refs_before = body.data.use_count();
  {
    const grpc::ByteBuffer wire = PullResponseToWire(header, body);
    EXPECT_EQ(body.data.use_count(), refs_before + 1) << "the wire holds one reference";
    std::vector<grpc::Slice> slices;
    const std::string bytes = Join(wire, &slices);
    v1::PullResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes));
    EXPECT_EQ(parsed.SerializeAsString(), copied.SerializeAsString());
    EXPECT_EQ(parsed.params().data(), *body.data);
    EXPECT_EQ(parsed.version(), 1u);
    EXPECT_EQ(parsed.params().offset(), kRange.offset);
    EXPECT_EQ(parsed.params().length(), kRange.length);

    bool body_slice_found = false;
    for (const grpc::Slice& s : slices) {
      if (s.begin() == reinterpret_cast<const uint8_t*>(body.data->data())) {
        EXPECT_EQ(s.size(), body.data->size());
        body_slice_found = true;
      }
    }
    EXPECT_TRUE(body_slice_found) << "the body was copied instead of referenced";
  }
  EXPECT_EQ(body.data.use_count(), refs_before) << "the reference is dropped with the buffer";
}

INSTANTIATE_TEST_SUITE_P(
    EveryReturnCodec, PullResponseWire,
    ::testing::Values(Case{PullCodec::kFp32, true, false}, Case{PullCodec::kBf16, true, false},
                      Case{PullCodec::kBf16, false, false}, Case{PullCodec::kDelta, true, true},
                      Case{PullCodec::kDelta, false, false}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(PullCodecName(info.param.codec)) +
             (info.param.have_any ? "" : "ForcedFull");
    });

TEST(PullResponseWireBodies, PullsOfOneVersionShareOneCopyUntilTheNextStep) {
  ReturnPathOptions o;
  o.codec = PullCodec::kBf16;
  ReturnPath path(o);
  std::vector<float> params = RandomVector(kLength, 3);
  path.Reset(params, 0);
  v1::PullRequest req;
  req.set_have_any(true);
  v1::PullResponse a, b;
  const auto first = path.Encode(req, params, 0, kRange, &a);
  const auto second = path.Encode(req, params, 0, kRange, &b);
  EXPECT_EQ(first.data.get(), second.data.get());
  // The step drops the version's copy; pulls still sending it keep theirs.
  path.OnApplying();
  EXPECT_EQ(first.data.use_count(), 2);
  params = RandomVector(kLength, 4);
  ASSERT_TRUE(path.OnApplied(params, 1).ok());
  v1::PullResponse c;
  const auto next = path.Encode(req, params, 1, kRange, &c);
  EXPECT_NE(next.data.get(), first.data.get());
  EXPECT_NE(*next.data, *first.data);
}

}  // namespace
}  // namespace loco::test

// Pulls in parts (WorkerOptions::pull_parts, a PullStream opened as soon as
// the push is written): against real servers on loopback, workers with and
// without it end every step with the same parameters, bit for bit, for
// every return codec (including delta versions and full syncs); with the
// delta return path the pulls wait for the step and get its parts.
// Malformed answers are refused by PulledParts.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "tests/cluster/test_cluster.h"
#include "tests/common/random_batch.h"
#include "client/pulled_parts.h"
#include "client/worker.h"

namespace loco {
namespace {

constexpr size_t kElements = size_t{1} << 21;  // 2 shards of 2^20: several parts each

struct ReturnCase {
  const char* name;
  PullCodec codec;
  int bits;
};

double PullPartsSent(test::TestCluster& c) {
  double sum = 0;
  for (uint32_t k = 0; k < c.num_shards(); ++k) {
    for (const prometheus::MetricFamily& f : c.server_object(k).metrics_registry().Collect()) {
      if (f.name != "loco_server_pull_parts_total") continue;
      for (const auto& m : f.metric) sum += m.counter.value;
    }
  }
  return sum;
}

std::unique_ptr<test::TestCluster> StartCluster(const ReturnCase& rc) {
  test::ClusterOptions o;
  o.num_shards = 2;
  o.shard.hyper.lr = 1e-2f;
  o.shard.return_path.codec = rc.codec;
  o.shard.return_path.bits = rc.bits;
  o.shard.return_path.full_sync_every = 3;
  auto c = std::make_unique<test::TestCluster>(o);
  EXPECT_TRUE(c->Start());
  return c;
}

std::unique_ptr<Worker> JoinedWorker(test::TestCluster& c, bool pull_parts) {
  WorkerOptions o;
  o.security = TransportSecurityOptions::Insecure();  // loopback
  o.coordinator = c.coordinator_address();
  o.name = pull_parts ? "pull-parts" : "pull-whole";
  o.codec = PushCodec::kLoco;
  o.block_size = 128;  // divides the shard map's alignment
  o.pull_parts = pull_parts;
  o.push_chunk_bytes = 64 << 10;
  o.rpc_timeout_ms = 10000;
  o.pull_wait_ms = 10000;
  o.step_timeout_ms = 30000;
  o.join_timeout_ms = 20000;
  auto w = Worker::Connect(o);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return nullptr;
  const Status s = (*w)->Join(kElements);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::move(w).value();
}

class PullPartsTest : public ::testing::TestWithParam<ReturnCase> {};

TEST_P(PullPartsTest, StepsEndWithTheParametersOfWholePullsBitForBit) {
  std::unique_ptr<test::TestCluster> whole_cluster = StartCluster(GetParam());
  std::unique_ptr<test::TestCluster> parts_cluster = StartCluster(GetParam());
  std::unique_ptr<Worker> whole = JoinedWorker(*whole_cluster, false);
  std::unique_ptr<Worker> parted = JoinedWorker(*parts_cluster, true);
  ASSERT_NE(whole, nullptr);
  ASSERT_NE(parted, nullptr);
  const std::vector<float> init = Uniform(kElements, 51, -1, 1);
  std::vector<float> p_whole, p_parts;
  ASSERT_TRUE(whole->InitParameters(init, &p_whole).ok());
  ASSERT_TRUE(parted->InitParameters(init, &p_parts).ok());

  std::vector<float> buffer(kElements);
  for (uint64_t t = 0; t < 6; ++t) {  // deltas and, at versions 3 and 6, full syncs
    SCOPED_TRACE("step " + std::to_string(t));
    const std::vector<float> g = Uniform(kElements, 600 + t, -0.1f, 0.1f);
    auto r_whole = whole->Step(g, &p_whole);
    ASSERT_TRUE(r_whole.ok()) << r_whole.status().ToString();
    // The overlapped form: the push goes in parts, and the pull is opened
    // before the push is answered.
    auto r = parted->Step(
        [&](const GradientReady& ready) -> Status {
          for (size_t q = 4; q-- > 0;) {
            const size_t from = q * kElements / 4, to = (q + 1) * kElements / 4;
            std::copy(g.begin() + from, g.begin() + to, buffer.begin() + from);
            ready(from);
          }
          return Status::Ok();
        },
        buffer, &p_parts);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->pull_wire_bytes, r_whole->pull_wire_bytes);
    ASSERT_EQ(p_parts.size(), p_whole.size());
    ASSERT_EQ(std::memcmp(p_parts.data(), p_whole.data(), p_whole.size() * sizeof(float)), 0);
  }
  if (GetParam().codec == PullCodec::kDelta || GetParam().codec == PullCodec::kBf16) {
    // The pulls opened before the pushes were answered waited for the step
    // and got its parts (whether the step was still running when each part
    // went out depends on the scheduler; pull_stream_test checks that).
    EXPECT_GT(PullPartsSent(*parts_cluster), 0.0) << "no pull waited for a step's parts";
  }
  EXPECT_EQ(PullPartsSent(*whole_cluster), 0.0);
  EXPECT_TRUE(whole->Leave().ok());
  EXPECT_TRUE(parted->Leave().ok());
}

INSTANTIATE_TEST_SUITE_P(
    ReturnCodecs, PullPartsTest,
    ::testing::Values(ReturnCase{"delta4", PullCodec::kDelta, 4},
                      ReturnCase{"delta8", PullCodec::kDelta, 8},
                      ReturnCase{"bf16", PullCodec::kBf16, 8},
                      ReturnCase{"fp32", PullCodec::kFp32, 8}),
    [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------- PulledParts

v1::PullChunk First(v1::Codec codec, uint64_t length, int bits = 4) {
  v1::PullChunk c;
  v1::PullResponse* h = c.mutable_header();
  h->set_version(3);
  h->set_is_delta(codec == v1::CODEC_BLOCK_QUANT);
  h->mutable_params()->set_codec(codec);
  h->mutable_params()->set_bits(static_cast<uint32_t>(bits));
  h->mutable_params()->set_block_size(128);
  h->mutable_params()->set_length(length);
  return c;
}

TEST(PulledParts, PiecesInAnyOrderMakeTheAnswer) {
  PulledParts parts;
  parts.Reset(300);
  v1::PullChunk first = First(v1::CODEC_BLOCK_QUANT, 300);  // 150 code bytes, 3 scales
  first.set_data(std::string(50, '\x22'));
  first.set_data_offset(100);
  first.set_scales(std::string(4, '\0'));
  first.set_scales_offset(8);
  ASSERT_TRUE(parts.Add(first).ok());
  v1::PullChunk rest;
  rest.set_data(std::string(100, '\x11'));
  rest.set_scales(std::string(8, '\0'));
  EXPECT_FALSE(parts.Finish().ok());  // not covered yet
  ASSERT_TRUE(parts.Add(rest).ok());
  ASSERT_TRUE(parts.Finish().ok());
  const PulledParamsView v = parts.view();
  EXPECT_EQ(v.header->version(), 3u);
  ASSERT_EQ(v.data.size(), 1u);
  ASSERT_EQ(v.data[0].size(), 150u);
  EXPECT_EQ(v.data[0][99], 0x11);
  EXPECT_EQ(v.data[0][100], 0x22);
  EXPECT_EQ(v.scales.size(), 12u);
}

TEST(PulledParts, MalformedStreamsAreRefusedAtTheBadChunk) {
  struct Bad {
    const char* why;
    std::vector<v1::PullChunk> chunks;
    const char* says;
  };
  v1::PullChunk no_header;
  no_header.set_data("x");
  v1::PullChunk with_data = First(v1::CODEC_FP32, 10);
  with_data.mutable_header()->mutable_params()->set_data("x");
  v1::PullChunk too_long = First(v1::CODEC_FP32, 101);
  v1::PullChunk bad_codec = First(v1::CODEC_UNSPECIFIED, 10);
  v1::PullChunk bad_bits = First(v1::CODEC_BLOCK_QUANT, 10, 3);
  v1::PullChunk fp32 = First(v1::CODEC_FP32, 10);  // 40 bytes
  fp32.set_data(std::string(20, 'a'));
  v1::PullChunk overlap;
  overlap.set_data(std::string(10, 'b'));
  overlap.set_data_offset(15);
  v1::PullChunk past;
  past.set_data(std::string(30, 'c'));
  past.set_data_offset(20);
  v1::PullChunk empty;
  v1::PullChunk second_header = First(v1::CODEC_FP32, 10);
  const std::vector<Bad> cases = {
      {"no header", {no_header}, "no header"},
      {"data in header", {with_data}, "carries data"},
      {"longer than the shard", {too_long}, "length 101"},
      {"unknown codec", {bad_codec}, "codec"},
      {"bad bits", {bad_bits}, "bits"},
      {"overlap", {fp32, overlap}, "overlaps"},
      {"past the end", {fp32, past}, "past the 40"},
      {"empty later chunk", {fp32, empty}, "neither"},
      {"second header", {fp32, second_header}, "only the first"},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.why);
    PulledParts parts;
    parts.Reset(100);
    Status s = Status::Ok();
    for (const v1::PullChunk& c : b.chunks) {
      s = parts.Add(c);
      if (!s.ok()) break;
    }
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(b.says), std::string::npos) << s.message();
  }
  PulledParts none;
  none.Reset(100);
  EXPECT_FALSE(none.Finish().ok());
}

// Bytes as gRPC received them: in slices cut at `cuts` (byte positions).
grpc::ByteBuffer Sliced(const std::string& bytes, const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t from = 0;
  for (size_t cut : cuts) {
    if (cut <= from || cut >= bytes.size()) continue;
    slices.emplace_back(bytes.data() + from, cut - from);
    from = cut;
  }
  slices.emplace_back(bytes.data() + from, bytes.size() - from);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// A chunk as gRPC received it: its serialized bytes, cut at `cuts`.
grpc::ByteBuffer Received(const v1::PullChunk& chunk, const std::vector<size_t>& cuts) {
  return Sliced(chunk.SerializeAsString(), cuts);
}

TEST(PulledParts, ChunksReadFromReceivedBytesEqualParsedOnesOrAreRefused) {
  v1::PullChunk first = First(v1::CODEC_BLOCK_QUANT, 1000);  // 500 code bytes, 8 scales
  std::string codes(500, '\0'), scales(32, '\0');
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<char>(i * 7);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<char>(i + 1);
  first.set_data(codes.substr(300));
  first.set_data_offset(300);
  first.set_scales(scales.substr(16));
  first.set_scales_offset(16);
  v1::PullChunk second;
  second.set_data(codes.substr(0, 300));
  second.set_scales(scales.substr(0, 16));
  for (const std::vector<size_t>& cuts :
       {std::vector<size_t>{}, std::vector<size_t>{1}, std::vector<size_t>{3, 40, 41, 250},
        std::vector<size_t>{5, 6, 7, 8, 9, 10, 100, 400}}) {
    PulledParts raw, parsed;
    raw.Reset(1000);
    parsed.Reset(1000);
    ASSERT_TRUE(raw.Add(Received(first, cuts)).ok());
    ASSERT_TRUE(raw.Add(Received(second, cuts)).ok());
    ASSERT_TRUE(parsed.Add(first).ok());
    ASSERT_TRUE(parsed.Add(second).ok());
    ASSERT_TRUE(raw.Finish().ok());
    ASSERT_TRUE(parsed.Finish().ok());
    EXPECT_EQ(raw.header().SerializeAsString(), parsed.header().SerializeAsString());
    const PulledParamsView a = raw.view(), b = parsed.view();
    ASSERT_EQ(a.data[0].size(), codes.size());
    EXPECT_EQ(std::memcmp(a.data[0].data(), codes.data(), codes.size()), 0);
    EXPECT_EQ(std::memcmp(b.data[0].data(), codes.data(), codes.size()), 0);
    ASSERT_EQ(a.scales.size(), scales.size());
    EXPECT_EQ(std::memcmp(a.scales.data(), scales.data(), scales.size()), 0);
  }
  // Truncated bytes: DataLoss, as protobuf's parser would refuse them.
  const std::string whole = first.SerializeAsString();
  for (size_t keep : {size_t{1}, size_t{5}, whole.size() - 1}) {
    SCOPED_TRACE("kept " + std::to_string(keep) + " bytes");
    v1::PullChunk check;
    ASSERT_FALSE(check.ParseFromString(whole.substr(0, keep)));
    grpc::Slice cut(whole.data(), keep);
    PulledParts raw;
    raw.Reset(1000);
    const Status s = raw.Add(grpc::ByteBuffer(&cut, 1));
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  }
}

// A key or a length in more than 5 bytes, however small its value: protobuf
// reads both as 32-bit numbers and refuses the encoding, so the reader over
// gRPC's slices must refuse it too (found by pull_parts_fuzz: a 6-byte key
// of an unknown fixed32 field was accepted).
TEST(PulledParts, KeysAndLengthsLongerThanProtobufReadsAreRefused) {
  const std::string header = First(v1::CODEC_FP32, 10).SerializeAsString();
  const std::string field20_fixed32_key6 = std::string("\xa5\x81\x80\x80\x80\x00", 6) + "abcd";
  const std::string field20_fixed32_key5 = std::string("\xa5\x81\x80\x80\x00", 5) + "abcd";
  const std::string data_length6 = std::string("\x12\x81\x80\x80\x80\x80\x00", 7) + "x";
  const std::string data_length5 = std::string("\x12\x81\x80\x80\x80\x00", 6) + "x";
  struct Case {
    const char* what;
    std::string wire;
    bool valid;
  };
  for (const Case& c : {Case{"6-byte key", header + field20_fixed32_key6, false},
                        Case{"5-byte key", header + field20_fixed32_key5, true},
                        Case{"6-byte length", header + data_length6, false},
                        Case{"5-byte length", header + data_length5, true}}) {
    SCOPED_TRACE(c.what);
    v1::PullChunk check;
    ASSERT_EQ(check.ParseFromString(c.wire), c.valid) << "protobuf's verdict changed";
    for (const std::vector<size_t>& cuts :
         {std::vector<size_t>{}, std::vector<size_t>{header.size() + 2}}) {
      PulledParts raw;
      raw.Reset(100);
      const Status s = raw.Add(Sliced(c.wire, cuts));
      if (c.valid) {
        EXPECT_TRUE(s.ok()) << s.ToString();
      } else {
        EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
        EXPECT_NE(s.message().find("longer than 5 bytes"), std::string::npos) << s.message();
      }
    }
  }
}

}  // namespace
}  // namespace loco

// Bad input gets a precise status and changes nothing: params, m, v,
// version and the open step's pushes stay byte-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "tests/cluster/test_cluster.h"
#include "tests/common/same_bits.h"
#include "tests/server/reference.h"

namespace loco::test {
namespace {

constexpr uint64_t kValidationTotal = 1000;  // not a multiple of the 128 block: a short last block

struct State {
  std::vector<float> params, m, v;
  uint64_t version = 0;
  bool initialized = false;
  uint32_t pending = 0;
};

State Capture(TestCluster& c) {
  ShardStore s = c.service(0).Snapshot();
  return {s.params(), s.m(), s.v(), s.version(), s.initialized(), c.service(0).pending_pushes()};
}

::testing::AssertionResult Unchanged(const State& before, const State& after) {
  if (!SameBits(before.params, after.params)) return ::testing::AssertionFailure() << "params";
  if (!SameBits(before.m, after.m)) return ::testing::AssertionFailure() << "m";
  if (!SameBits(before.v, after.v)) return ::testing::AssertionFailure() << "v";
  if (before.version != after.version) return ::testing::AssertionFailure() << "version";
  if (before.initialized != after.initialized) return ::testing::AssertionFailure() << "init";
  if (before.pending != after.pending) return ::testing::AssertionFailure() << "pending pushes";
  return ::testing::AssertionSuccess();
}

void SetFloatAt(std::string* bytes, size_t index, float value) {
  std::memcpy(bytes->data() + 4 * index, &value, 4);
}

class Validation : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.shard.hyper.lr = 1e-2f;
    o.shard.return_path.codec = PullCodec::kFp32;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_TRUE(cluster_->Start());
    for (int i = 0; i < 2; ++i) {
      v1::JoinResponse join;
      ASSERT_TRUE(cluster_->Join(kValidationTotal, &join).ok());
      workers_.push_back(join.worker_id());
    }
    init_ = RandomVector(kValidationTotal, 11);
    ASSERT_TRUE(cluster_->InitShard(0, workers_[0], Fp32Payload(init_, 0)).ok());
    ref_ = std::make_unique<ReferenceAdamW>(init_, o.shard.hyper);
    // One applied step (so m and v are non-zero) and one pending push.
    std::vector<double> mean(kValidationTotal, 0.0);
    for (size_t w = 0; w < 2; ++w) {
      const auto p = QuantPayload(RandomVector(kValidationTotal, 20 + w), 0, 4, 128);
      ASSERT_TRUE(cluster_->Push(0, workers_[w], 0, p).ok());
      const auto d = DecodeReference(p);
      for (size_t i = 0; i < kValidationTotal; ++i) mean[i] += d[i] / 2;
    }
    ref_->Step(mean);
    pending_ = QuantPayload(RandomVector(kValidationTotal, 30), 0, 4, 128);
    ASSERT_TRUE(cluster_->Push(0, workers_[0], 1, pending_).ok());
    valid_ = QuantPayload(RandomVector(kValidationTotal, 31), 0, 4, 128);
  }

  // Pushes `payload` (for shard `shard`, step `step`) from worker 1, as a
  // unary Push and as a PushStream in chunks, and expects `code` with no
  // state change from both, with the same message.
  void ExpectRejected(const std::string& what, const v1::Payload& payload, grpc::StatusCode code,
                      uint32_t shard = 0, uint64_t step = 1) {
    SCOPED_TRACE(what);
    const State before = Capture(*cluster_);
    auto s = cluster_->Push(shard, workers_[1], step, payload);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_FALSE(s.error_message().empty());
    EXPECT_TRUE(Unchanged(before, Capture(*cluster_)));
    auto chunked = cluster_->PushInChunks(shard, workers_[1], step, payload, kChunkBytes);
    EXPECT_EQ(chunked.error_code(), code) << chunked.error_message();
    EXPECT_EQ(chunked.error_message(), s.error_message());
    EXPECT_TRUE(Unchanged(before, Capture(*cluster_)));
  }

  // Sends `chunks` as one PushStream to shard 0 and returns its status
  // (and, when `resp` is given, the response).
  grpc::Status PushStream(const std::vector<v1::PushChunk>& chunks,
                          v1::PushResponse* resp = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::PushResponse ignored;
    auto writer = cluster_->server(0).PushStream(&ctx, resp != nullptr ? resp : &ignored);
    for (const v1::PushChunk& chunk : chunks) {
      if (!writer->Write(chunk)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  // A malformed push stream, with a part of the message it must be refused with.
  struct StreamCase {
    std::string what;
    std::vector<v1::PushChunk> chunks;
    std::string message;
  };
  // Each stream is refused with INVALID_ARGUMENT and that message, and
  // leaves the shard's state byte for byte as it was.
  void ExpectRefusedAndNothingChanged(const std::vector<StreamCase>& cases) {
    for (const StreamCase& c : cases) {
      SCOPED_TRACE(c.what);
      const State before = Capture(*cluster_);
      const grpc::Status s = PushStream(c.chunks);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
      EXPECT_NE(s.error_message().find(c.message), std::string::npos) << s.error_message();
      EXPECT_TRUE(Unchanged(before, Capture(*cluster_)));
    }
  }

  // Once step 1 completed with pending_ and valid_: the pulled parameters
  // are plain AdamW on the mean of exactly those two payloads.
  void ExpectStepOneIsTheMeanOfPendingAndValid() {
    const auto a = DecodeReference(pending_), b = DecodeReference(valid_);
    std::vector<double> mean(kValidationTotal);
    for (size_t i = 0; i < kValidationTotal; ++i) mean[i] = (a[i] + b[i]) / 2;
    ref_->Step(mean);
    v1::PullResponse pulled;
    ASSERT_TRUE(cluster_->PullFull(0, 2, 5000, &pulled).ok());
    EXPECT_TRUE(AllNear(FloatsOf(pulled.params().data()), ref_->params(), 1e-5));
  }

  // Small enough that even a 4-bit push of kValidationTotal elements takes 4 chunks.
  static constexpr size_t kChunkBytes = 128;

  v1::Payload Mutated(const std::function<void(v1::Payload*)>& f) {
    v1::Payload p = valid_;
    f(&p);
    return p;
  }

  std::unique_ptr<TestCluster> cluster_;
  std::vector<uint64_t> workers_;
  std::vector<float> init_;
  std::unique_ptr<ReferenceAdamW> ref_;
  v1::Payload pending_, valid_;
};

TEST_F(Validation, EveryBadPushIsRefusedPreciselyAndChangesNothing) {
  using grpc::StatusCode;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  ExpectRejected("wrong shard", valid_, StatusCode::NOT_FOUND, /*shard=*/7);
  ExpectRejected("wrong offset", Mutated([](v1::Payload* p) { p->set_offset(128); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("wrong length", Mutated([](v1::Payload* p) { p->set_length(999); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("unspecified codec",
                 Mutated([](v1::Payload* p) { p->set_codec(v1::CODEC_UNSPECIFIED); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("unknown codec", Mutated([](v1::Payload* p) { p->set_codec(v1::Codec(42)); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("bits 3", Mutated([](v1::Payload* p) { p->set_bits(3); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("bits 16", Mutated([](v1::Payload* p) { p->set_bits(16); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("block 100", Mutated([](v1::Payload* p) { p->set_block_size(100); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("block 0", Mutated([](v1::Payload* p) { p->set_block_size(0); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("block 8192", Mutated([](v1::Payload* p) { p->set_block_size(8192); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("short data",
                 Mutated([](v1::Payload* p) { p->mutable_data()->pop_back(); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("long data", Mutated([](v1::Payload* p) { p->mutable_data()->push_back(0); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("one scale too few",
                 Mutated([](v1::Payload* p) { p->mutable_scales()->resize(p->scales().size() - 4); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("one scale too many",
                 Mutated([](v1::Payload* p) { p->mutable_scales()->append(4, '\0'); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("ragged scale bytes",
                 Mutated([](v1::Payload* p) { p->mutable_scales()->push_back('\0'); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("NaN scale",
                 Mutated([&](v1::Payload* p) { SetFloatAt(p->mutable_scales(), 3, nan); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("Inf scale",
                 Mutated([&](v1::Payload* p) { SetFloatAt(p->mutable_scales(), 7, inf); }),
                 StatusCode::INVALID_ARGUMENT);
  ExpectRejected("negative scale",
                 Mutated([](v1::Payload* p) { SetFloatAt(p->mutable_scales(), 0, -0.5f); }),
                 StatusCode::INVALID_ARGUMENT);

  auto fp32 = Fp32Payload(RandomVector(kValidationTotal, 40), 0);
  auto with_nan = fp32;
  SetFloatAt(with_nan.mutable_data(), 500, nan);
  ExpectRejected("NaN fp32 value", with_nan, StatusCode::INVALID_ARGUMENT);
  auto with_inf = fp32;
  SetFloatAt(with_inf.mutable_data(), 999, -inf);
  ExpectRejected("Inf fp32 value", with_inf, StatusCode::INVALID_ARGUMENT);
  auto fp32_with_scales = fp32;
  fp32_with_scales.set_scales(std::string(32, '\0'));
  ExpectRejected("fp32 with scales", fp32_with_scales, StatusCode::INVALID_ARGUMENT);
  v1::Payload bf16;
  bf16.set_codec(v1::CODEC_BF16);
  bf16.set_length(kValidationTotal);
  bf16.set_data(std::string(2 * kValidationTotal, '\0'));
  bf16.mutable_data()->at(2 * 10 + 1) = static_cast<char>(0x7F);  // bf16 0x7F80 = +Inf
  bf16.mutable_data()->at(2 * 10) = static_cast<char>(0x80);
  ExpectRejected("Inf bf16 value", bf16, StatusCode::INVALID_ARGUMENT);
  ExpectRejected("short bf16", Mutated([](v1::Payload* p) {
                   p->set_codec(v1::CODEC_BF16);
                   p->clear_scales();
                   p->set_data(std::string(2 * kValidationTotal - 2, '\0'));
                 }),
                 StatusCode::INVALID_ARGUMENT);

  ExpectRejected("step already applied", valid_, StatusCode::FAILED_PRECONDITION, 0, 0);
  ExpectRejected("step ahead", valid_, StatusCode::FAILED_PRECONDITION, 0, 2);
  ExpectRejected("step 2^64-1", valid_, StatusCode::FAILED_PRECONDITION, 0, ~uint64_t{0});
  // Finite but absurd: decoded gradients beyond 1e18 would overflow AdamW's
  // fp32 second moment (server/owned_payload.h).
  ExpectRejected("absurd scale",
                 Mutated([](v1::Payload* p) { SetFloatAt(p->mutable_scales(), 2, 1e30f); }),
                 StatusCode::INVALID_ARGUMENT);
  auto absurd_fp32 = fp32;
  SetFloatAt(absurd_fp32.mutable_data(), 3, -1e25f);
  ExpectRejected("absurd fp32 value", absurd_fp32, StatusCode::INVALID_ARGUMENT);
  {
    // Workers that are not participants of the open step are not held.
    SCOPED_TRACE("non-member worker");
    const State before = Capture(*cluster_);
    auto s = cluster_->Push(0, workers_[1] + 1000, 1, valid_);
    EXPECT_EQ(s.error_code(), StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_TRUE(Unchanged(before, Capture(*cluster_)));
  }

  // Nothing leaked into the open step: a valid push completes it with the
  // mean of exactly the two accepted payloads.
  ASSERT_TRUE(cluster_->Push(0, workers_[1], 1, valid_).ok());
  ExpectStepOneIsTheMeanOfPendingAndValid();
}

TEST_F(Validation, MalformedPushStreamsAreRefusedAtTheBadChunkAndChangeNothing) {
  v1::PushRequest request;
  request.set_worker_id(workers_[1]);
  request.set_shard_id(0);
  request.set_step(1);
  *request.mutable_gradient() = valid_;
  const std::string& data = valid_.data();
  const auto header_only = [&] {
    v1::PushChunk c;
    *c.mutable_header() = request;
    c.mutable_header()->mutable_gradient()->clear_data();
    return c;
  };
  const auto data_chunk = [](const std::string& bytes) {
    v1::PushChunk c;
    c.set_data(bytes);
    return c;
  };
  v1::PushChunk header_with_data;
  *header_with_data.mutable_header() = request;
  v1::PushChunk late_header = header_only();
  late_header.set_data(data.substr(100));
  std::vector<StreamCase> cases = {
      {"no chunk", {}, "carried no chunk"},
      {"no header", {data_chunk(data)}, "push chunk 0 has no header"},
      {"data in the header", {header_with_data}, "header carries 500 bytes"},
      {"second header", {[&] { auto c = header_only(); c.set_data(data.substr(0, 100)); return c; }(),
                         late_header},
       "push chunk 1 carries a header"},
      {"empty later chunk", {header_only(), data_chunk(data), data_chunk("")},
       "push chunk 2 carries no data"},
      // 4 bytes per element is the most any payload of the shard needs.
      {"more than fp32", {header_only(), data_chunk(std::string(4 * kValidationTotal, '\0')),
                          data_chunk("x")},
       "passes 4000 bytes at push chunk 2"},
      // Well-formed stream, bad payload: the push's own check.
      {"short data", {header_only(), data_chunk(data.substr(1))}, "data has 499 bytes"},
  };
  ExpectRefusedAndNothingChanged(cases);

  // The same push, well formed, in 72 chunks: accepted, it completes the
  // step with the mean of exactly the two accepted payloads.
  v1::PushResponse resp;
  ASSERT_TRUE(cluster_->PushInChunks(0, workers_[1], 1, valid_, 7, &resp).ok());
  EXPECT_FALSE(resp.duplicate());
  EXPECT_EQ(resp.version(), 2u);
  ExpectStepOneIsTheMeanOfPendingAndValid();
}

TEST_F(Validation, PlacedPushStreamsActLikeAUnaryPushOrAreRefusedAndChangeNothing) {
  // valid_: 4-bit, block 128, 1000 elements: 500 data bytes, 32 scales bytes.
  ASSERT_EQ(valid_.data().size(), 500u);
  ASSERT_EQ(valid_.scales().size(), 32u);
  v1::PushRequest request;
  request.set_worker_id(workers_[1]);
  request.set_shard_id(0);
  request.set_step(1);
  *request.mutable_gradient() = valid_;
  const std::string& data = valid_.data();
  const std::string& scales = valid_.scales();
  const auto header = [&] {
    v1::PushChunk c;
    *c.mutable_header() = request;
    c.mutable_header()->mutable_gradient()->clear_data();
    c.mutable_header()->mutable_gradient()->clear_scales();
    c.set_placed(true);
    return c;
  };
  const auto piece = [](const std::string& bytes, uint64_t offset, bool is_scales = false) {
    v1::PushChunk c;
    if (is_scales) {
      c.set_scales(bytes);
      c.set_scales_offset(offset);
    } else {
      c.set_data(bytes);
      c.set_data_offset(offset);
    }
    return c;
  };
  // The header, then the data in 100-byte pieces from the end down, the
  // scales' second half after the first piece and their first half last.
  const auto descending = [&](const std::string& with_scales) {
    std::vector<v1::PushChunk> chunks = {header()};
    for (uint64_t at = 400;; at -= 100) {
      chunks.push_back(piece(data.substr(at, 100), at));
      if (at == 400) chunks.push_back(piece(with_scales.substr(16), 16, true));
      if (at == 0) break;
    }
    chunks.push_back(piece(with_scales.substr(0, 16), 0, true));
    return chunks;
  };
  std::vector<StreamCase> cases;
  {
    auto c = descending(scales);
    c.push_back(piece(data.substr(250, 10), 250));
    cases.push_back({"overlap", c, "push chunk 8's data [250, 260) overlaps data bytes [0, 500)"});
  }
  {
    auto c = descending(scales);
    c.erase(c.begin() + 4);  // data [200, 300)
    cases.push_back({"gap", c, "the placed push covered 400 of 500 data bytes"});
  }
  {
    auto c = descending(scales);
    c.insert(c.begin() + 1, piece(data.substr(0, 100), 450));
    cases.push_back({"out of bounds", c, "puts 100 data bytes at offset 450, past the 500 bytes"});
  }
  {
    auto c = descending(scales);
    c.push_back(piece(scales.substr(0, 4), 32, true));
    cases.push_back({"scales out of bounds", c, "4 scales bytes at offset 32, past the 32 bytes"});
  }
  {
    auto c = descending(scales);
    c[0].mutable_header()->mutable_gradient()->set_scales(scales);
    cases.push_back(
        {"scales in the header", c, "placed header carries 32 bytes of gradient scales"});
  }
  {
    // Well-formed stream, bad payload: the push's own check.
    std::string nan_scales = scales;
    SetFloatAt(&nan_scales, 3, std::numeric_limits<float>::quiet_NaN());
    cases.push_back({"NaN scale", descending(nan_scales), "scale 3 is nan"});
  }
  ExpectRefusedAndNothingChanged(cases);

  // Well formed, the end first: accepted, it completes the step with the
  // mean of exactly the two accepted payloads.
  v1::PushResponse resp;
  const grpc::Status placed = PushStream(descending(scales), &resp);
  ASSERT_TRUE(placed.ok()) << placed.error_message();
  EXPECT_FALSE(resp.duplicate());
  EXPECT_EQ(resp.version(), 2u);
  ExpectStepOneIsTheMeanOfPendingAndValid();

  // A twin cluster (SetUp is deterministic) given the same push as a unary
  // Push ends in the same state, byte for byte.
  const std::unique_ptr<TestCluster> placed_cluster = std::move(cluster_);
  workers_.clear();
  SetUp();
  ASSERT_FALSE(HasFatalFailure());
  v1::PushResponse unary_resp;
  ASSERT_TRUE(cluster_->Push(0, workers_[1], 1, valid_, &unary_resp).ok());
  EXPECT_EQ(unary_resp.version(), resp.version());
  EXPECT_TRUE(Unchanged(Capture(*placed_cluster), Capture(*cluster_)));
}

TEST_F(Validation, InitShardIsFirstWriterWinsAndValidated) {
  const State before = Capture(*cluster_);
  auto again =
      cluster_->InitShard(0, workers_[1], Fp32Payload(RandomVector(kValidationTotal, 5), 0));
  EXPECT_EQ(again.error_code(), grpc::StatusCode::ALREADY_EXISTS) << again.error_message();
  auto same_values = cluster_->InitShard(0, workers_[1], Fp32Payload(init_, 0));
  EXPECT_EQ(same_values.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  auto quantized = cluster_->InitShard(0, workers_[1], valid_);
  EXPECT_EQ(quantized.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(Unchanged(before, Capture(*cluster_)));
}

TEST_F(Validation, PullsForWrongShardOrUnreachedVersionFailClearly) {
  const State before = Capture(*cluster_);
  v1::PullRequest req;
  req.set_shard_id(3);
  v1::PullResponse resp;
  EXPECT_EQ(cluster_->Pull(req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  req.set_shard_id(0);
  req.set_min_version(5);
  req.set_wait_ms(50);
  auto late = cluster_->Pull(req, &resp);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(late.error_message().find("reached version 1"), std::string::npos)
      << late.error_message();
  EXPECT_TRUE(Unchanged(before, Capture(*cluster_)));
}

TEST(ValidationUninitialised, PushAndPullBeforeInitAreRefusedAndBadInitChangesNothing) {
  ClusterOptions o;
  TestCluster c(o);
  ASSERT_TRUE(c.Start());
  v1::JoinResponse join;
  ASSERT_TRUE(c.Join(kValidationTotal, &join).ok());
  auto push =
      c.Push(0, join.worker_id(), 0, QuantPayload(RandomVector(kValidationTotal, 1), 0, 4, 128));
  EXPECT_EQ(push.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << push.error_message();
  v1::PullResponse resp;
  auto pull = c.PullFull(0, 0, 50, &resp);
  EXPECT_EQ(pull.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << pull.error_message();

  auto bad = Fp32Payload(RandomVector(kValidationTotal, 2), 0);
  SetFloatAt(bad.mutable_data(), 17, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(c.InitShard(0, join.worker_id(), bad).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  auto short_init = Fp32Payload(RandomVector(kValidationTotal - 1, 2), 0);
  EXPECT_EQ(c.InitShard(0, join.worker_id(), short_init).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  const auto wrong_shard =
      c.InitShard(5, join.worker_id(), Fp32Payload(RandomVector(kValidationTotal, 2), 0));
  EXPECT_EQ(wrong_shard.error_code(), grpc::StatusCode::NOT_FOUND);
  v1::ShardStatusResponse st;
  ASSERT_TRUE(c.ShardStatus(0, &st).ok());
  EXPECT_FALSE(st.initialized());
  EXPECT_EQ(st.version(), 0u);
  EXPECT_EQ(st.length(), kValidationTotal);
  EXPECT_FALSE(c.service(0).Snapshot().initialized());
}

}  // namespace
}  // namespace loco::test

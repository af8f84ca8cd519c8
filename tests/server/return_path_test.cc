// The return path: a client following 8-bit deltas stays within the
// quantization bound of the fp32 master and equals it after a periodic full
// sync; bf16 pulls are the master rounded to nearest even.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/cast.h"
#include "kernels/quantize.h"
#include "server/return_path.h"
#include "tests/cluster/test_cluster.h"
#include "tests/common/same_bits.h"
#include "tests/server/reference.h"

namespace loco::test {
namespace {

constexpr uint64_t kPathTotal = 1000;

TEST(ReturnPath, DeltaFollowerStaysWithinQuantizationBoundAndResyncsExactly) {
  ClusterOptions o;
  o.shard.hyper.lr = 1e-2f;
  o.shard.return_path.codec = PullCodec::kDelta;
  o.shard.return_path.bits = 8;
  o.shard.return_path.block_size = 128;
  o.shard.return_path.full_sync_every = 5;
  TestCluster c(o);
  ASSERT_TRUE(c.Start());
  v1::JoinResponse join;
  ASSERT_TRUE(c.Join(kPathTotal, &join).ok());
  const uint64_t me = join.worker_id();
  std::vector<float> copy = RandomVector(kPathTotal, 5);  // the client's copy, version 0
  ASSERT_TRUE(c.InitShard(0, me, Fp32Payload(copy, 0)).ok());

  int deltas = 0, syncs = 0;
  for (uint64_t t = 0; t < 12; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    ASSERT_TRUE(c.Push(0, me, t, Fp32Payload(RandomVector(kPathTotal, 200 + t), 0)).ok());
    v1::PullRequest req;
    req.set_worker_id(me);
    req.set_min_version(t + 1);
    req.set_wait_ms(5000);
    req.set_have_version(t);
    req.set_have_any(true);
    v1::PullResponse resp;
    ASSERT_TRUE(c.Pull(req, &resp).ok());
    ASSERT_EQ(resp.version(), t + 1);
    const auto master = c.service(0).Snapshot().params();
    const bool sync_version = (t + 1) % 5 == 0;
    ASSERT_EQ(resp.is_delta(), !sync_version);
    if (resp.is_delta()) {
      ++deltas;
      const auto& p = resp.params();
      ASSERT_EQ(p.codec(), v1::CODEC_BLOCK_QUANT);
      ASSERT_EQ(p.bits(), 8u);
      const auto delta = DecodeReference(p);  // code * scale, exact in float
      const auto scales = FloatsOf(p.scales());
      for (size_t i = 0; i < kPathTotal; ++i) copy[i] += static_cast<float>(delta[i]);
      // Nearest rounding leaves at most half a quantization step per element;
      // the rest is fp32 rounding of the additions.
      for (size_t i = 0; i < kPathTotal; ++i) {
        const double bound =
            0.5 * scales[i / 128] + 4 * std::numeric_limits<float>::epsilon() * std::fabs(master[i]);
        ASSERT_LE(std::fabs(double(copy[i]) - master[i]), bound) << "element " << i;
      }
      EXPECT_FALSE(SameBits(copy, master));  // the delta is lossy: this is a real test
    } else {
      ++syncs;
      ASSERT_EQ(resp.params().codec(), v1::CODEC_FP32);
      copy = FloatsOf(resp.params().data());
      EXPECT_TRUE(SameBits(copy, master)) << "a periodic full sync is the exact master";
    }
    // The client holds exactly the server's replica W.
    ASSERT_TRUE(SameBits(copy, c.service(0).ReturnReplica()));
  }
  EXPECT_EQ(deltas, 10);
  EXPECT_EQ(syncs, 2);

  // Joining (have_any = false), asking for a full copy, or holding an older
  // version: a full fp32 copy of what the delta followers hold.
  for (int variant = 0; variant < 3; ++variant) {
    v1::PullRequest req;
    req.set_have_any(variant != 0);
    req.set_want_full(variant == 1);
    req.set_have_version(variant == 2 ? 9 : 11);
    v1::PullResponse resp;
    ASSERT_TRUE(c.Pull(req, &resp).ok());
    EXPECT_FALSE(resp.is_delta());
    ASSERT_EQ(resp.params().codec(), v1::CODEC_FP32);
    EXPECT_TRUE(SameBits(FloatsOf(resp.params().data()), copy)) << "variant " << variant;
  }
}

TEST(ReturnPath, Bf16PullsAreTheRoundedMasterAndForcedFullIsFp32) {
  ClusterOptions o;
  o.shard.hyper.lr = 1e-2f;
  o.shard.return_path.codec = PullCodec::kBf16;
  TestCluster c(o);
  ASSERT_TRUE(c.Start());
  v1::JoinResponse join;
  ASSERT_TRUE(c.Join(kPathTotal, &join).ok());
  ASSERT_TRUE(c.InitShard(0, join.worker_id(), Fp32Payload(RandomVector(kPathTotal, 9), 0)).ok());
  for (uint64_t t = 0; t < 2; ++t) {
    ASSERT_TRUE(
        c.Push(0, join.worker_id(), t, Fp32Payload(RandomVector(kPathTotal, 90 + t), 0)).ok());
  }
  const auto master = c.service(0).Snapshot().params();
  v1::PullRequest req;
  req.set_min_version(2);
  req.set_have_any(true);
  req.set_have_version(1);
  v1::PullResponse resp;
  ASSERT_TRUE(c.Pull(req, &resp).ok());
  ASSERT_EQ(resp.params().codec(), v1::CODEC_BF16);
  ASSERT_EQ(resp.params().data().size(), 2 * kPathTotal);
  size_t rounded_differently = 0;
  for (size_t i = 0; i < kPathTotal; ++i) {
    uint16_t b;
    std::memcpy(&b, resp.params().data().data() + 2 * i, 2);
    uint32_t u = uint32_t{b} << 16;
    float got;
    std::memcpy(&got, &u, 4);
    const float want = RoundToBf16(master[i]);
    ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << "element " << i << ": " << got << " vs " << want;
    rounded_differently += got != master[i];
  }
  EXPECT_GT(rounded_differently, 0u);

  req.set_want_full(true);
  ASSERT_TRUE(c.Pull(req, &resp).ok());
  ASSERT_EQ(resp.params().codec(), v1::CODEC_FP32);
  EXPECT_TRUE(SameBits(FloatsOf(resp.params().data()), master));
  req.set_want_full(false);
  req.set_have_any(false);
  ASSERT_TRUE(c.Pull(req, &resp).ok());
  ASSERT_EQ(resp.params().codec(), v1::CODEC_FP32);
}

// Once every worker of the step has pulled the new version, the server
// drops the bf16 body it can make again, so that it is not held while the
// next step's pushes arrive; a later pull gets an equal new copy. The
// delta's codes moved the replica and are kept for the whole version.
TEST(ReturnPath, BodyIsDroppedOnceEveryWorkerOfTheStepPulledItButNotTheDelta) {
  for (const PullCodec codec : {PullCodec::kBf16, PullCodec::kDelta}) {
    SCOPED_TRACE(PullCodecName(codec));
    ClusterOptions o;
    o.shard.return_path.codec = codec;
    o.shard.return_path.full_sync_every = 0;
    TestCluster c(o);
    ASSERT_TRUE(c.Start());
    v1::JoinResponse a, b;
    ASSERT_TRUE(c.Join(kPathTotal, &a).ok());
    ASSERT_TRUE(c.Join(kPathTotal, &b).ok());
    ASSERT_TRUE(c.InitShard(0, a.worker_id(), Fp32Payload(RandomVector(kPathTotal, 3), 0)).ok());
    for (const uint64_t w : {a.worker_id(), b.worker_id()}) {
      ASSERT_TRUE(c.Push(0, w, 0, Fp32Payload(RandomVector(kPathTotal, 30 + w), 0)).ok());
    }
    const auto pull = [&](uint64_t worker) {
      v1::PullRequest req;
      req.set_worker_id(worker);
      req.set_min_version(1);
      req.set_have_any(true);
      req.set_have_version(0);
      v1::PullResponse header;
      ReturnPath::SharedBody body;
      EXPECT_TRUE(c.service(0).DoPull(req, &header, &body).ok());
      EXPECT_EQ(header.version(), 1u);
      EXPECT_EQ(header.is_delta(), codec == PullCodec::kDelta);
      return body.data;
    };
    const auto first = pull(a.worker_id());
    const auto again = pull(a.worker_id());  // b has not pulled: still cached
    EXPECT_EQ(again.get(), first.get());
    const auto last = pull(b.worker_id());  // the last of the step's workers
    EXPECT_EQ(last.get(), first.get());
    const auto late = pull(a.worker_id());
    ASSERT_NE(late, nullptr);
    EXPECT_EQ(*late, *first);
    if (codec == PullCodec::kBf16) {
      EXPECT_NE(late.get(), first.get()) << "the bf16 body was kept after every worker pulled";
      EXPECT_EQ(first.use_count(), 3) << "only this test's three references are left";
    } else {
      EXPECT_EQ(late.get(), first.get()) << "the delta must stay for the whole version";
    }
  }
}

// After init every joining worker pulls a full fp32 copy, and the server
// cannot know how many will: the next step's first push drops the copy,
// so that it is not held beside the step's payloads. A pull after that
// gets an equal new copy.
TEST(ReturnPath, FullCopyOfAVersionIsDroppedByTheNextStepsFirstPush) {
  for (const PullCodec codec : {PullCodec::kFp32, PullCodec::kBf16, PullCodec::kDelta}) {
    SCOPED_TRACE(PullCodecName(codec));
    ClusterOptions o;
    o.shard.return_path.codec = codec;
    TestCluster c(o);
    ASSERT_TRUE(c.Start());
    v1::JoinResponse a, b;
    ASSERT_TRUE(c.Join(kPathTotal, &a).ok());
    ASSERT_TRUE(c.Join(kPathTotal, &b).ok());
    const auto init = RandomVector(kPathTotal, 5);
    ASSERT_TRUE(c.InitShard(0, a.worker_id(), Fp32Payload(init, 0)).ok());
    const auto full_pull = [&](uint64_t worker) {
      v1::PullRequest req;
      req.set_worker_id(worker);
      req.set_want_full(true);
      v1::PullResponse header;
      ReturnPath::SharedBody body;
      EXPECT_TRUE(c.service(0).DoPull(req, &header, &body).ok());
      EXPECT_EQ(header.params().codec(), v1::CODEC_FP32);
      return body.data;
    };
    const auto first = full_pull(a.worker_id());
    EXPECT_EQ(full_pull(b.worker_id()).get(), first.get());
    // One of two participants: the step stays open, the version stays 0.
    ASSERT_TRUE(c.Push(0, a.worker_id(), 0, Fp32Payload(RandomVector(kPathTotal, 6), 0)).ok());
    EXPECT_EQ(first.use_count(), 1) << "the server still holds the full copy";
    const auto late = full_pull(b.worker_id());
    ASSERT_NE(late, nullptr);
    EXPECT_NE(late.get(), first.get());
    EXPECT_EQ(*late, *first);
    EXPECT_EQ(FloatsOf(*late), init);
  }
}

// The server encodes a shard's delta in chunks, shared out among its apply
// threads; the codes, the scales and the replica must be those of one pass
// over the whole shard, bit for bit, for every code width (several chunks
// and a partial last block) and every thread count.
TEST(ReturnPathChunks, LargeDeltaOnAnyThreadsEqualsOnePassQuantizationBitForBit) {
  const size_t n = 3 * 65536 + 1000;
  const std::vector<float> before = RandomVector(n, 11);
  const std::vector<float> after = RandomVector(n, 12);
  for (uint32_t threads : {1u, 2u, 3u, 8u})
  for (int bits : {2, 4, 8}) {
    SCOPED_TRACE("bits " + std::to_string(bits) + ", threads " + std::to_string(threads));
    ReturnPathOptions o;
    o.codec = PullCodec::kDelta;
    o.bits = bits;
    o.block_size = 128;
    o.full_sync_every = 0;
    o.threads = threads;
    ReturnPath path(o);
    path.Reset(before, 0);
    ASSERT_TRUE(path.OnApplied(after, 1).ok());

    std::vector<float> d(n);
    for (size_t i = 0; i < n; ++i) d[i] = after[i] - before[i];
    QuantizeParams q;
    q.bits = bits;
    q.block_size = 128;
    q.rounding = Rounding::kNearest;
    std::string codes(PackedBytes(n, bits), '\0');
    std::vector<float> scales(NumBlocks(n, 128));
    QuantizeStats stats;
    ASSERT_TRUE(cpu::Quantize(d.data(), n, q, reinterpret_cast<uint8_t*>(codes.data()),
                              scales.data(), &stats)
                    .ok());
    std::vector<float> decoded(n);
    ASSERT_TRUE(cpu::Dequantize(reinterpret_cast<const uint8_t*>(codes.data()), scales.data(), n,
                                bits, 128, decoded.data())
                    .ok());
    std::vector<float> replica = before;
    for (size_t i = 0; i < n; ++i) replica[i] += decoded[i];

    v1::PullRequest req;
    req.set_have_any(true);
    req.set_have_version(0);
    v1::PullResponse header;
    const auto body = path.Encode(req, after, 1, ShardRange{0, n}, &header);
    ASSERT_TRUE(header.is_delta());
    ASSERT_NE(body.scales, nullptr);
    EXPECT_TRUE(*body.data == codes) << "codes differ from one pass";
    ASSERT_EQ(body.scales->size(), scales.size() * 4);
    EXPECT_EQ(std::memcmp(body.scales->data(), scales.data(), body.scales->size()), 0);
    EXPECT_TRUE(SameBits(path.replica(), replica));

    // The same delta encoded in parts (as a step encodes it while AdamW
    // finishes each piece), last piece first: the same bytes and replica.
    ReturnPath parts(o);
    parts.Reset(before, 0);
    parts.OnApplying();
    const ReturnPath::AnswerBuffers buffers = parts.BeginAnswer(n, 1);
    ASSERT_NE(buffers.data, nullptr);
    constexpr size_t kPiece = 65536;
    for (size_t begin = (n - 1) / kPiece * kPiece;; begin -= kPiece) {
      ASSERT_TRUE(parts.EncodeAnswerRange(after.data(), begin, std::min(kPiece, n - begin)).ok());
      if (begin == 0) break;
    }
    ASSERT_TRUE(parts.FinishAnswer(after, 1, Status::Ok()).ok());
    EXPECT_TRUE(*buffers.data == codes) << "codes in parts differ from one pass";
    EXPECT_EQ(std::memcmp(buffers.scales->data(), scales.data(), buffers.scales->size()), 0);
    EXPECT_TRUE(SameBits(parts.replica(), replica));
    v1::PullResponse parts_header;
    const auto parts_body = parts.Encode(req, after, 1, ShardRange{0, n}, &parts_header);
    EXPECT_TRUE(parts_header.is_delta());
    EXPECT_EQ(parts_body.data, buffers.data);  // the buffers the parts were written into
  }
}

// The bf16 copy encoded in parts, in any order, is the body a pull of the
// version gets: the same buffer, the master rounded by the tests' own
// rounding. A failed step's parts are not kept: the first pull makes it.
TEST(ReturnPathParts, Bf16CopyInPartsIsThePullBody) {
  const size_t n = 100000;
  const std::vector<float> master = RandomVector(n, 23);
  ReturnPathOptions o;
  o.codec = PullCodec::kBf16;
  ReturnPath path(o);
  path.Reset(RandomVector(n, 24), 0);
  path.OnApplying();
  EXPECT_EQ(path.answer_block(), 1u);
  const ReturnPath::AnswerBuffers buffers = path.BeginAnswer(n, 1);
  ASSERT_NE(buffers.data, nullptr);
  EXPECT_EQ(buffers.scales, nullptr);
  ASSERT_EQ(buffers.data->size(), 2 * n);
  for (const size_t begin : {size_t{70000}, size_t{0}, size_t{33333}}) {
    const size_t end = begin == 70000 ? n : begin == 0 ? 33333 : 70000;
    ASSERT_TRUE(path.EncodeAnswerRange(master.data(), begin, end - begin).ok());
  }
  ASSERT_TRUE(path.FinishAnswer(master, 1, Status::Ok()).ok());
  v1::PullRequest req;
  req.set_have_any(true);
  req.set_have_version(0);
  v1::PullResponse header;
  const auto body = path.Encode(req, master, 1, ShardRange{0, n}, &header);
  EXPECT_EQ(body.data, buffers.data);  // shared, not made again
  EXPECT_FALSE(header.is_delta());
  EXPECT_EQ(header.params().codec(), v1::CODEC_BF16);
  v1::PullResponse parts_header;
  path.AnswerHeader(1, ShardRange{0, n}, &parts_header);
  EXPECT_EQ(parts_header.SerializeAsString(), header.SerializeAsString());
  for (size_t i = 0; i < n; ++i) {
    uint16_t got = 0;
    std::memcpy(&got, body.data->data() + 2 * i, 2);
    const float want = RoundToBf16(master[i]);
    uint32_t want_bits = 0;
    std::memcpy(&want_bits, &want, 4);
    ASSERT_EQ(got, want_bits >> 16) << "element " << i;
  }

  // A step whose encoding failed: its buffer is dropped, and the first
  // pull makes the copy from the master.
  path.OnApplying();
  const ReturnPath::AnswerBuffers failed = path.BeginAnswer(n, 2);
  ASSERT_NE(failed.data, nullptr);
  EXPECT_FALSE(path.FinishAnswer(master, 2, Internal("a piece failed")).ok());
  req.set_have_version(1);
  const auto remade = path.Encode(req, master, 2, ShardRange{0, n}, &header);
  EXPECT_NE(remade.data, failed.data);
  EXPECT_TRUE(*remade.data == *body.data);
}

// A version due for a full sync gets no delta buffers; FinishAnswer then sets
// the replica to the master. A failed encoding falls back the same way, and
// a cancelled step leaves the replica and makes the next version a sync.
TEST(ReturnPathParts, SyncVersionsFailuresAndCancelledStepsGiveNoDelta) {
  const size_t n = 1000;
  const std::vector<float> before = RandomVector(n, 21), after = RandomVector(n, 22);
  ReturnPathOptions o;
  o.codec = PullCodec::kDelta;
  o.bits = 4;
  o.full_sync_every = 2;
  ReturnPath path(o);
  path.Reset(before, 0);
  path.OnApplying();
  EXPECT_EQ(path.BeginAnswer(n, 2).data, nullptr);  // 2 % 2 == 0: a sync version
  ASSERT_TRUE(path.FinishAnswer(after, 2, Status::Ok()).ok());
  EXPECT_TRUE(SameBits(path.replica(), after));
  EXPECT_EQ(path.delta_version(), 0u);

  path.Reset(before, 0);
  path.OnApplying();
  ASSERT_NE(path.BeginAnswer(n, 1).data, nullptr);
  ASSERT_TRUE(path.EncodeAnswerRange(after.data(), 0, 512).ok());
  EXPECT_FALSE(path.FinishAnswer(after, 1, Internal("non-finite")).ok());
  EXPECT_TRUE(SameBits(path.replica(), after));
  EXPECT_EQ(path.delta_version(), 0u);

  path.Reset(before, 0);
  path.OnApplying();
  ASSERT_NE(path.BeginAnswer(n, 1).data, nullptr);
  path.CancelAnswer();
  EXPECT_TRUE(SameBits(path.replica(), before));
  EXPECT_EQ(path.BeginAnswer(n, 1).data, nullptr);  // the next version is a sync
}

// Each version's answer is encoded into the buffers of the last one once
// no pull holds them (server/answer_spares.h), and is still exactly what a
// fresh buffer would hold: every byte is written, the last partial byte of
// the codes included (an odd length at 4 bits).
TEST(ReturnPath, ANextVersionsAnswerReusesTheLastOnesBuffersBitForBit) {
  const size_t n = 3 * 65536 + 1001;
  for (const PullCodec codec : {PullCodec::kDelta, PullCodec::kBf16}) {
    SCOPED_TRACE(PullCodecName(codec));
    ReturnPathOptions o;
    o.codec = codec;
    o.bits = 4;
    o.block_size = 128;
    o.full_sync_every = 0;
    ReturnPath path(o);
    path.Reset(RandomVector(n, 50), 0);
    const char* last_data = nullptr;
    for (uint64_t version = 1; version <= 3; ++version) {
      SCOPED_TRACE(version);
      const std::vector<float> master = RandomVector(n, 50 + version);
      const std::vector<float> replica_before = path.replica();
      ASSERT_TRUE(path.OnApplied(master, version).ok());
      v1::PullRequest req;
      req.set_have_any(true);
      req.set_have_version(version - 1);
      v1::PullResponse header;
      ReturnPath::SharedBody body = path.Encode(req, master, version, ShardRange{0, n}, &header);
      if (last_data != nullptr) {
        EXPECT_EQ(body.data->data(), last_data) << "a new buffer";
      }
      last_data = body.data->data();
      if (codec == PullCodec::kBf16) {
        std::vector<uint16_t> expected(n);
        cpu::CastFp32ToBf16(master.data(), n, expected.data());
        ASSERT_EQ(body.data->size(), 2 * n);
        EXPECT_EQ(std::memcmp(body.data->data(), expected.data(), 2 * n), 0);
      } else {
        ASSERT_TRUE(header.is_delta());
        std::vector<float> d(n);
        for (size_t i = 0; i < n; ++i) d[i] = master[i] - replica_before[i];
        QuantizeParams q;
        q.bits = 4;
        q.block_size = 128;
        q.rounding = Rounding::kNearest;
        std::string codes(PackedBytes(n, 4), '\0');
        std::vector<float> scales(NumBlocks(n, 128));
        QuantizeStats stats;
        ASSERT_TRUE(cpu::Quantize(d.data(), n, q, reinterpret_cast<uint8_t*>(codes.data()),
                                  scales.data(), &stats)
                        .ok());
        EXPECT_TRUE(*body.data == codes) << "codes differ from a fresh one-pass encoding";
        ASSERT_EQ(body.scales->size(), scales.size() * 4);
        EXPECT_EQ(std::memcmp(body.scales->data(), scales.data(), body.scales->size()), 0);
      }
      // Every worker has its answer: the shard and the pull let go of it,
      // and its buffers wait for the next version's.
      path.ReleaseRemakeableBodies();
      body = {};
      path.OnApplying();
      EXPECT_GE(path.answer_spare_bytes(), codec == PullCodec::kBf16 ? 2 * n : PackedBytes(n, 4));
    }
  }
}

}  // namespace
}  // namespace loco::test

// ParameterServer.PullStream against a real server on loopback: a pull
// that waits for the next version gets the step's answer (the delta, or the
// bf16 copy) in parts while the step is still computing, and the parts put
// together are the answer a unary Pull gives, byte for byte, on any number
// of apply threads. Answers that are not a step's (a sync version, a full
// copy) come whole, in chunks. Bad pulls get a clear status and change
// nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/client_context.h>
#include <prometheus/metric_family.h>

#include "tests/cluster/test_cluster.h"
#include "tests/server/reference.h"

namespace loco::test {
namespace {

// A stream's chunks put in place by their offsets (independently of the
// worker's assembler), with every byte counted once.
struct Assembled {
  v1::PullResponse header;
  std::string data, scales;
  size_t chunks = 0, data_bytes = 0, scales_bytes = 0;
  bool header_in_first_only = true;
};

grpc::Status ReadStream(v1::ParameterServer::Stub& stub, const v1::PullRequest& req,
                        Assembled* out, const std::function<void()>& on_first = {}) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto reader = stub.PullStream(&ctx, req);
  v1::PullChunk chunk;
  while (reader->Read(&chunk)) {
    if (out->chunks == 0) {
      if (on_first) on_first();
      out->header = chunk.header();
      const v1::Payload& p = out->header.params();
      const size_t n = p.length();
      out->data.assign(p.codec() == v1::CODEC_FP32   ? 4 * n
                       : p.codec() == v1::CODEC_BF16 ? 2 * n
                                                     : (n * p.bits() + 7) / 8,
                       '\0');
      out->scales.assign(p.codec() == v1::CODEC_BLOCK_QUANT
                             ? 4 * ((n + p.block_size() - 1) / p.block_size())
                             : 0,
                         '\0');
    } else if (chunk.has_header()) {
      out->header_in_first_only = false;
    }
    EXPECT_LE(chunk.data_offset() + chunk.data().size(), out->data.size());
    EXPECT_LE(chunk.scales_offset() + chunk.scales().size(), out->scales.size());
    if (chunk.data_offset() + chunk.data().size() > out->data.size() ||
        chunk.scales_offset() + chunk.scales().size() > out->scales.size()) {
      break;
    }
    std::memcpy(out->data.data() + chunk.data_offset(), chunk.data().data(), chunk.data().size());
    std::memcpy(out->scales.data() + chunk.scales_offset(), chunk.scales().data(),
                chunk.scales().size());
    out->data_bytes += chunk.data().size();
    out->scales_bytes += chunk.scales().size();
    ++out->chunks;
  }
  return reader->Finish();
}

v1::PullRequest NextVersion(uint64_t worker, uint64_t have_version) {
  v1::PullRequest req;
  req.set_worker_id(worker);
  req.set_shard_id(0);
  req.set_min_version(have_version + 1);
  req.set_wait_ms(10000);
  req.set_have_version(have_version);
  req.set_have_any(true);
  return req;
}

double PullParts(TestCluster& c) {
  for (const prometheus::MetricFamily& f : c.server_object(0).metrics_registry().Collect()) {
    if (f.name != "loco_server_pull_parts_total") continue;
    double sum = 0;
    for (const auto& m : f.metric) sum += m.counter.value;
    return sum;
  }
  return -1;
}

// A started cluster whose one shard holds `total` random parameters,
// initialised by the one worker it admitted (*me).
std::unique_ptr<TestCluster> InitialisedCluster(const ClusterOptions& o, uint64_t total,
                                                uint64_t* me) {
  auto c = std::make_unique<TestCluster>(o);
  EXPECT_TRUE(c->Start());
  v1::JoinResponse join;
  EXPECT_TRUE(c->Join(total, &join).ok());
  *me = join.worker_id();
  EXPECT_TRUE(c->InitShard(0, *me, Fp32Payload(RandomVector(total, 31), 0)).ok());
  return c;
}

// The master as bf16 bytes, by the tests' own rounding (RoundToBf16).
std::string Bf16Of(const std::vector<float>& values) {
  std::string out(values.size() * 2, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    const float rounded = RoundToBf16(values[i]);
    uint32_t bits = 0;
    std::memcpy(&bits, &rounded, 4);
    const uint16_t half = static_cast<uint16_t>(bits >> 16);
    std::memcpy(out.data() + 2 * i, &half, 2);
  }
  return out;
}

struct StepAnswerCase {
  const char* name;
  PullCodec codec;
  uint32_t apply_threads;
};

class PullStreamStep : public ::testing::TestWithParam<StepAnswerCase> {};

TEST_P(PullStreamStep, ArrivesInPartsWhileTheStepComputesAndEqualsThePullAnswer) {
  constexpr uint64_t kTotal = uint64_t{1} << 22;  // a step of tens of ms
  const bool delta = GetParam().codec == PullCodec::kDelta;
  ClusterOptions o;
  o.shard.hyper.lr = 1e-2f;
  o.shard.return_path.codec = GetParam().codec;
  o.shard.return_path.bits = 4;
  o.shard.return_path.block_size = 128;
  o.shard.return_path.full_sync_every = 0;
  o.shard.apply_threads = GetParam().apply_threads;
  uint64_t me = 0;
  std::unique_ptr<TestCluster> cluster = InitialisedCluster(o, kTotal, &me);
  TestCluster& c = *cluster;

  // Whether a part reached the client before the step's push was answered
  // depends on the scheduler as well (the writing thread needs a core while
  // the step's threads run): some step of three must show it.
  int early_steps = 0;
  for (uint64_t t = 0; t < 3; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    std::atomic<bool> pushed{false};
    bool first_before_push_returned = false;
    Assembled parts;
    grpc::Status streamed;
    const double parts_before = PullParts(c);
    std::thread reader([&] {
      streamed = ReadStream(c.server(0), NextVersion(me, t), &parts,
                            [&] { first_before_push_returned = !pushed.load(); });
    });
    // The pull waits on the server before the step's only push arrives.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_TRUE(c.Push(0, me, t, Fp32Payload(RandomVector(kTotal, 40 + t, 0.1f), 0)).ok());
    pushed = true;
    reader.join();
    ASSERT_TRUE(streamed.ok()) << streamed.error_message();
    early_steps += first_before_push_returned ? 1 : 0;
    // 2 MB of codes (8 MB of bf16), at most 1 MiB per chunk however many
    // parts a slow writer finds waiting and merges.
    EXPECT_GE(parts.chunks, 2u);
    EXPECT_GT(PullParts(c), parts_before);
    EXPECT_TRUE(parts.header_in_first_only);
    // Every byte exactly once.
    EXPECT_EQ(parts.data_bytes, parts.data.size());
    EXPECT_EQ(parts.scales_bytes, parts.scales.size());

    v1::PullResponse whole;
    ASSERT_TRUE(c.Pull(NextVersion(me, t), &whole).ok());
    EXPECT_EQ(whole.is_delta(), delta);
    EXPECT_EQ(parts.header.is_delta(), delta);
    EXPECT_EQ(parts.header.params().codec(),
              delta ? v1::CODEC_BLOCK_QUANT : v1::CODEC_BF16);
    EXPECT_EQ(parts.header.version(), t + 1);
    EXPECT_EQ(parts.header.version(), whole.version());
    EXPECT_EQ(parts.header.params().codec(), whole.params().codec());
    EXPECT_EQ(parts.header.params().bits(), whole.params().bits());
    EXPECT_EQ(parts.header.params().block_size(), whole.params().block_size());
    EXPECT_EQ(parts.header.params().offset(), whole.params().offset());
    EXPECT_EQ(parts.header.params().length(), whole.params().length());
    EXPECT_TRUE(parts.data == whole.params().data()) << "codes differ";
    EXPECT_TRUE(parts.scales == whole.params().scales()) << "scales differ";
    if (!delta) {
      EXPECT_TRUE(parts.data == Bf16Of(c.Snapshot(0).params())) << "not the master in bf16";
    }
  }
  // On one apply thread a core is left for the writer on any machine with
  // two; on more threads than cores the step may take them all.
  if (GetParam().apply_threads == 1) {
    EXPECT_GT(early_steps, 0) << "every step's first part came only after the step had finished";
  }
}

INSTANTIATE_TEST_SUITE_P(
    CodecsAndApplyThreads, PullStreamStep,
    ::testing::Values(StepAnswerCase{"delta_1_thread", PullCodec::kDelta, 1},
                      StepAnswerCase{"delta_3_threads", PullCodec::kDelta, 3},
                      StepAnswerCase{"bf16_1_thread", PullCodec::kBf16, 1},
                      StepAnswerCase{"bf16_3_threads", PullCodec::kBf16, 3}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(PullStream, AnswersThatAreNotAStepDeltaComeWholeInChunks) {
  constexpr uint64_t kTotal = 600000;  // 2.4 MB in fp32: several chunks
  ClusterOptions o;
  o.shard.hyper.lr = 1e-2f;
  o.shard.return_path.codec = PullCodec::kDelta;
  o.shard.return_path.bits = 8;
  o.shard.return_path.full_sync_every = 1;  // every version is a sync
  uint64_t me = 0;
  std::unique_ptr<TestCluster> cluster = InitialisedCluster(o, kTotal, &me);
  TestCluster& c = *cluster;

  Assembled parts;
  grpc::Status streamed;
  std::thread reader([&] { streamed = ReadStream(c.server(0), NextVersion(me, 0), &parts); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(c.Push(0, me, 0, Fp32Payload(RandomVector(kTotal, 6, 0.1f), 0)).ok());
  reader.join();
  ASSERT_TRUE(streamed.ok()) << streamed.error_message();
  EXPECT_FALSE(parts.header.is_delta());
  EXPECT_EQ(parts.header.params().codec(), v1::CODEC_FP32);
  EXPECT_EQ(parts.header.version(), 1u);
  EXPECT_GE(parts.chunks, 3u);
  const ShardStore master = c.Snapshot(0);
  ASSERT_EQ(parts.data.size(), master.params().size() * 4);
  EXPECT_EQ(std::memcmp(parts.data.data(), master.params().data(), parts.data.size()), 0);

  // A forced full copy of the current version, streamed: the fp32 master.
  v1::PullRequest full = NextVersion(me, 0);
  full.set_min_version(1);
  full.set_want_full(true);
  Assembled copy;
  ASSERT_TRUE(ReadStream(c.server(0), full, &copy).ok());
  EXPECT_TRUE(copy.data == parts.data);
}

TEST(PullStream, BadPullsGetAClearStatusAndChangeNothing) {
  constexpr uint64_t kTotal = 1000;
  ClusterOptions o;
  o.shard.return_path.codec = PullCodec::kDelta;
  uint64_t me = 0;
  std::unique_ptr<TestCluster> cluster = InitialisedCluster(o, kTotal, &me);
  TestCluster& c = *cluster;
  const ShardStore before = c.Snapshot(0);

  v1::PullRequest wrong = NextVersion(me, 0);
  wrong.set_shard_id(5);
  Assembled a;
  grpc::Status s = ReadStream(c.server(0), wrong, &a);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_EQ(a.chunks, 0u);

  // Nobody pushes: the wait ends at wait_ms with the version not reached.
  v1::PullRequest unreached = NextVersion(me, 0);
  unreached.set_wait_ms(50);
  s = ReadStream(c.server(0), unreached, &a);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_EQ(a.chunks, 0u);

  const ShardStore after = c.Snapshot(0);
  EXPECT_EQ(after.version(), before.version());
  EXPECT_EQ(std::memcmp(after.params().data(), before.params().data(), kTotal * 4), 0);
  EXPECT_EQ(c.service(0).pending_pushes(), 0u);

  // A server that stops releases a stream waiting for parts.
  grpc::Status stopped;
  std::thread waiting([&] { stopped = ReadStream(c.server(0), NextVersion(me, 0), &a); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  c.service(0).Stop();
  waiting.join();
  EXPECT_EQ(stopped.error_code(), grpc::StatusCode::UNAVAILABLE) << stopped.error_message();
}

}  // namespace
}  // namespace loco::test

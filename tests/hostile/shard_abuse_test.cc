// Pushes, inits and oversized messages from hostile clients over a real
// loopback channel (raw generated stubs): each class is refused with a
// precise code and leaves params, m, v, version, held pushes and the return
// replica byte-identical; the server carries on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <thread>

#include "server/checkpoint.h"
#include "server/parameter_server.h"
#include "tests/hostile/hostile_state.h"
#include "tests/server/reference.h"

namespace loco::test {
namespace {

constexpr uint64_t kTotal = PrimedCluster::kTotal;

class ShardAbuse : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Prime(&p_)); }
  TestCluster& c() { return *p_.cluster; }

  void ExpectRefused(const std::string& what, uint64_t worker, uint64_t step,
                     const v1::Payload& g, grpc::StatusCode code) {
    SCOPED_TRACE(what);
    const ShardState before = CaptureShard(c().service(0));
    grpc::Status s = c().Push(0, worker, step, g);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_FALSE(s.error_message().empty());
    EXPECT_TRUE(SameShard(before, CaptureShard(c().service(0))));
  }

  PrimedCluster p_;
};

TEST_F(ShardAbuse, AbsurdMagnitudesAreRefused) {
  v1::Payload scale8 = QuantPayload(RandomVector(kTotal, 40), 0, 8, 128);
  // 8-bit codes reach |code| = 128: a scale of 8e15 decodes to 1.02e18.
  const float over8 = 8e15f;
  std::memcpy(scale8.mutable_scales()->data() + 4 * 3, &over8, 4);
  ExpectRefused("8-bit scale over 1e18/128", p_.workers[1], 1, scale8,
                grpc::StatusCode::INVALID_ARGUMENT);
  v1::Payload scale2 = QuantPayload(RandomVector(kTotal, 41), 0, 2, 64);
  const float over2 = 6e17f;  // 2-bit: |code| <= 2, limit 5e17
  std::memcpy(scale2.mutable_scales()->data(), &over2, 4);
  ExpectRefused("2-bit scale over 1e18/2", p_.workers[1], 1, scale2,
                grpc::StatusCode::INVALID_ARGUMENT);
  v1::Payload max_scale = p_.valid;
  const float fmax = std::numeric_limits<float>::max();
  std::memcpy(max_scale.mutable_scales()->data() + 4 * 7, &fmax, 4);
  ExpectRefused("FLT_MAX scale", p_.workers[1], 1, max_scale, grpc::StatusCode::INVALID_ARGUMENT);

  std::vector<float> values = RandomVector(kTotal, 42);
  values[999] = 2e18f;
  ExpectRefused("fp32 value 2e18", p_.workers[1], 1, Fp32Payload(values, 0),
                grpc::StatusCode::INVALID_ARGUMENT);
  values[999] = -std::numeric_limits<float>::max();
  ExpectRefused("fp32 value -FLT_MAX", p_.workers[1], 1, Fp32Payload(values, 0),
                grpc::StatusCode::INVALID_ARGUMENT);
  v1::Payload bf16;
  bf16.set_codec(v1::CODEC_BF16);
  bf16.set_length(kTotal);
  bf16.set_data(std::string(2 * kTotal, '\0'));
  bf16.mutable_data()->at(2 * 5) = static_cast<char>(0x80);  // 0x5F80 = 2^64
  bf16.mutable_data()->at(2 * 5 + 1) = static_cast<char>(0x5F);
  ExpectRefused("bf16 value 2^64", p_.workers[1], 1, bf16, grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ShardAbuse, OnlyTheOpenStepsParticipantsArePaidForAndReplaysAreNotReapplied) {
  // A worker that joined after step 1 opened is not one of its participants:
  // its push is refused, not held.
  v1::JoinResponse late;
  ASSERT_TRUE(c().Join(kTotal, &late).ok());
  ExpectRefused("late joiner", late.worker_id(), 1, p_.valid, grpc::StatusCode::FAILED_PRECONDITION);
  ExpectRefused("never joined", 424242, 1, p_.valid, grpc::StatusCode::FAILED_PRECONDITION);
  ExpectRefused("worker 0", 0, 1, p_.valid, grpc::StatusCode::FAILED_PRECONDITION);
  ExpectRefused("next step", p_.workers[1], 2, p_.valid, grpc::StatusCode::FAILED_PRECONDITION);
  ExpectRefused("last step", ~uint64_t{0}, ~uint64_t{0}, p_.valid,
                grpc::StatusCode::FAILED_PRECONDITION);
  ExpectRefused("replay of applied step 0", p_.workers[1], 0,
                QuantPayload(RandomVector(kTotal, 21), 0, 4, 128),
                grpc::StatusCode::FAILED_PRECONDITION);

  // A second push of step 1 by workers[0] is acknowledged, not held again:
  // the first payload (seed 30) stays.
  const ShardState before = CaptureShard(c().service(0));
  v1::PushResponse dup;
  ASSERT_TRUE(c().Push(0, p_.workers[0], 1, p_.valid, &dup).ok());
  EXPECT_TRUE(dup.duplicate());
  EXPECT_TRUE(SameShard(before, CaptureShard(c().service(0))));
  EXPECT_LE(c().service(0).pending_pushes(), 2u);  // never more than the participants

  // Completing step 1 applies exactly the two participants' first payloads,
  // once: an independent double-precision AdamW over the same history.
  ASSERT_TRUE(c().Push(0, p_.workers[1], 1, p_.valid).ok());
  ASSERT_EQ(c().Snapshot(0).version(), 2u);
  ExpectRefused("replay of step 1 after it applied", p_.workers[1], 1, p_.valid,
                grpc::StatusCode::FAILED_PRECONDITION);
  AdamWParams hyper;
  hyper.lr = 1e-2f;
  ReferenceAdamW ref(RandomVector(kTotal, 11), hyper);
  auto mean_of = [](const v1::Payload& a, const v1::Payload& b) {
    const auto x = DecodeReference(a), y = DecodeReference(b);
    std::vector<double> m(x.size());
    for (size_t i = 0; i < m.size(); ++i) m[i] = (x[i] + y[i]) / 2;
    return m;
  };
  ref.Step(mean_of(QuantPayload(RandomVector(kTotal, 20), 0, 4, 128),
                   QuantPayload(RandomVector(kTotal, 21), 0, 4, 128)));
  ref.Step(mean_of(QuantPayload(RandomVector(kTotal, 30), 0, 4, 128), p_.valid));
  EXPECT_TRUE(AllNear(c().Snapshot(0).params(), ref.params(), 1e-5));
}

// Withdrawals (PushRequest.withdraw) over the wire: one that carries a
// gradient, names another step, or comes from a worker that pushed the open
// step or never joined is refused and changes nothing; the open step's
// other participant withdrawing completes it with the held push alone.
TEST_F(ShardAbuse, HostileWithdrawalsAreRefusedAndAParticipantsCompletesTheStep) {
  struct Case {
    std::string what;
    uint64_t worker, step;
    bool with_gradient;
    grpc::StatusCode code;
  };
  const std::vector<Case> cases = {
      {"with a gradient", p_.workers[1], 1, true, grpc::StatusCode::INVALID_ARGUMENT},
      {"after pushing the step", p_.workers[0], 1, false, grpc::StatusCode::FAILED_PRECONDITION},
      {"never joined", 424242, 1, false, grpc::StatusCode::FAILED_PRECONDITION},
      {"next step", p_.workers[1], 2, false, grpc::StatusCode::FAILED_PRECONDITION},
      {"applied step 0", p_.workers[1], 0, false, grpc::StatusCode::FAILED_PRECONDITION},
  };
  const auto withdraw = [&](uint64_t worker, uint64_t step, bool with_gradient) {
    v1::PushRequest req;
    req.set_worker_id(worker);
    req.set_shard_id(0);
    req.set_step(step);
    req.set_withdraw(true);
    if (with_gradient) *req.mutable_gradient() = p_.valid;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::PushResponse resp;
    return c().server(0).Push(&ctx, req, &resp);
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    const ShardState before = CaptureShard(c().service(0));
    const grpc::Status s = withdraw(k.worker, k.step, k.with_gradient);
    EXPECT_EQ(s.error_code(), k.code) << s.error_message();
    EXPECT_FALSE(s.error_message().empty());
    EXPECT_TRUE(SameShard(before, CaptureShard(c().service(0))));
  }
  // workers[1] withdraws from step 1: it applies with workers[0]'s held
  // push (seed 30) alone, against an independent double-precision AdamW.
  const grpc::Status s = withdraw(p_.workers[1], 1, false);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(c().Snapshot(0).version(), 2u);
  AdamWParams hyper;
  hyper.lr = 1e-2f;
  ReferenceAdamW ref(RandomVector(kTotal, 11), hyper);
  const auto a = DecodeReference(QuantPayload(RandomVector(kTotal, 20), 0, 4, 128));
  const auto b = DecodeReference(QuantPayload(RandomVector(kTotal, 21), 0, 4, 128));
  std::vector<double> mean(a.size());
  for (size_t i = 0; i < mean.size(); ++i) mean[i] = (a[i] + b[i]) / 2;
  ref.Step(mean);
  ref.Step(DecodeReference(QuantPayload(RandomVector(kTotal, 30), 0, 4, 128)));
  EXPECT_TRUE(AllNear(c().Snapshot(0).params(), ref.params(), 1e-5));
}

TEST_F(ShardAbuse, InitOfAnInitialisedShardIsRefused) {
  const ShardState before = CaptureShard(c().service(0));
  auto again = c().InitShard(0, p_.workers[1], Fp32Payload(RandomVector(kTotal, 5), 0));
  EXPECT_EQ(again.error_code(), grpc::StatusCode::ALREADY_EXISTS) << again.error_message();
  auto stranger = c().InitShard(0, 777, Fp32Payload(RandomVector(kTotal, 5), 0));
  EXPECT_EQ(stranger.error_code(), grpc::StatusCode::ALREADY_EXISTS) << stranger.error_message();
  EXPECT_TRUE(SameShard(before, CaptureShard(c().service(0))));
}

TEST(ShardAbuseUninitialised, OnlyAMemberMayInitialise) {
  TestCluster c(ClusterOptions{});
  ASSERT_TRUE(c.Start());
  v1::JoinResponse join;
  ASSERT_TRUE(c.Join(kTotal, &join).ok());
  const auto init = Fp32Payload(RandomVector(kTotal, 3), 0);
  auto stranger = c.InitShard(0, join.worker_id() + 100, init);
  EXPECT_EQ(stranger.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << stranger.error_message();
  auto zero = c.InitShard(0, 0, init);
  EXPECT_EQ(zero.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << zero.error_message();
  ASSERT_TRUE(c.Leave(join.worker_id()).ok());
  auto departed = c.InitShard(0, join.worker_id(), init);
  EXPECT_EQ(departed.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_FALSE(c.service(0).Snapshot().initialized());
  // A member's init is accepted (the refusals were about membership).
  v1::JoinResponse member;
  ASSERT_TRUE(c.Join(kTotal, &member).ok());
  ASSERT_TRUE(c.InitShard(0, member.worker_id(), init).ok());
  EXPECT_TRUE(c.service(0).Snapshot().initialized());
}

// Writes a checkpoint of shard 0 covering `range` at `version` into a fresh
// folder named after `name`; returns the options that restore it.
CheckpointOptions WriteCheckpoint(const std::string& name, ShardRange range, uint64_t version,
                                  uint64_t total_elements = 0) {
  CheckpointOptions co;
  co.dir = ::testing::TempDir() + "/" + name + "_" + std::to_string(::getpid());
  co.every = 0;
  std::filesystem::remove_all(co.dir);
  ShardCheckpoint cp;
  cp.range = range;
  cp.version = version;
  cp.total_elements = total_elements;
  cp.params = RandomVector(range.length, 50);
  cp.m = RandomVector(range.length, 51, 0.01f);
  cp.v.assign(range.length, 1e-4f);
  Checkpointer writer(co);
  EXPECT_TRUE(writer.Prepare().ok());
  EXPECT_TRUE(writer.Write(cp).ok());
  return co;
}

ParameterServerOptions RestoringServer(const TestCluster& c, const CheckpointOptions& co) {
  ParameterServerOptions so;
  so.coordinator = c.coordinator_address();
  so.security = TransportSecurityOptions::Insecure();
  so.checkpoint = co;
  so.step_poll = std::chrono::milliseconds(20);
  return so;
}

// A shard restored from a checkpoint fast-forwards to a step ahead of it,
// but only for a participant of that step and only to a step the cluster
// has reached: a stranger cannot move it, nor a member beyond the newest
// step a server asked about or reported plus one (here the restored
// version, 5).
TEST(ShardAbuseRestored, OnlyAParticipantFastForwardsARestoredShardAndNoFurtherThanTheCluster) {
  TestCluster c(ClusterOptions{});
  ASSERT_TRUE(c.Start());
  v1::JoinResponse join;
  ASSERT_TRUE(c.Join(kTotal, &join).ok());
  const CheckpointOptions co = WriteCheckpoint("hostile_restored", ShardRange{0, kTotal}, 5);
  ParameterServer server(RestoringServer(c, co));  // shard 0 again: the test talks to it directly
  ASSERT_TRUE(server.Start().ok());
  ASSERT_EQ(server.restored_version(), std::optional<uint64_t>(5));
  for (int i = 0; i < 500 && !server.registered(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(server.registered()) << "the restored server reports its version when it registers";
  auto stub = v1::ParameterServer::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  auto push = [&](uint64_t worker, uint64_t step) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::PushRequest req;
    req.set_worker_id(worker);
    req.set_step(step);
    *req.mutable_gradient() = QuantPayload(RandomVector(kTotal, 52), 0, 4, 128);
    v1::PushResponse resp;
    return stub->Push(&ctx, req, &resp);
  };
  const ShardState before = CaptureShard(server.service());
  for (uint64_t stranger : {uint64_t{0}, join.worker_id() + 7}) {
    grpc::Status s = push(stranger, 1000000);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  }
  EXPECT_TRUE(SameShard(before, CaptureShard(server.service())));
  // A member cannot move it past the cluster either: the coordinator refuses
  // to freeze a step no shard can have opened, and the shard is unchanged.
  for (uint64_t far : {uint64_t{7}, uint64_t{1000000}, std::numeric_limits<uint64_t>::max()}) {
    grpc::Status s = push(join.worker_id(), far);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << far;
    EXPECT_NE(s.error_message().find("ahead of the cluster"), std::string::npos)
        << s.error_message();
  }
  EXPECT_TRUE(SameShard(before, CaptureShard(server.service())));
  // The member (the step's only participant) moves it to the next step: the
  // push fast-forwards the shard to step 6 and completes it.
  grpc::Status ok = push(join.worker_id(), 6);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(server.service().Snapshot().version(), 7u);
  EXPECT_FALSE(server.service().range_unconfirmed()) << "the layout confirms the restored range";
  server.Shutdown(std::chrono::milliseconds(200));
  std::filesystem::remove_all(co.dir);
}

// A checkpoint without the model's size (0 here, as a format-1 file reads)
// leaves only the coordinator's layout to tell that its range is another
// layout's (a coordinator restarted with
// other --num-servers or --shard-align): the restored shard then refuses
// every request with a reason naming both ranges, instead of taking each
// worker's push as malformed, and changes nothing.
TEST(ShardAbuseRestored, ARangeOfAnotherLayoutIsRefusedNamingBothRanges) {
  TestCluster c(ClusterOptions{});
  ASSERT_TRUE(c.Start());
  v1::JoinResponse join;
  ASSERT_TRUE(c.Join(kTotal, &join).ok());
  const CheckpointOptions co = WriteCheckpoint("hostile_other_layout", ShardRange{0, 512}, 5);
  ParameterServer server(RestoringServer(c, co));
  ASSERT_TRUE(server.Start().ok());
  ASSERT_EQ(server.restored_version(), std::optional<uint64_t>(5));
  const ShardState before = CaptureShard(server.service());
  auto stub = v1::ParameterServer::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  grpc::Status s;
  for (int i = 0; i < 250; ++i) {  // the background loop checks every 20 ms
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::PushRequest req;
    req.set_worker_id(join.worker_id());
    req.set_step(5);
    *req.mutable_gradient() = QuantPayload(RandomVector(512, 52), 0, 4, 128);
    v1::PushResponse resp;
    s = stub->Push(&ctx, req, &resp);
    if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("restored from a checkpoint of [0, 512), but the "
                                   "coordinator's layout of 1000 elements gives shard 0 [0, 1000)"),
            std::string::npos)
      << s.error_message();
  {
    grpc::ClientContext ctx;
    v1::PullRequest req;
    req.set_worker_id(join.worker_id());
    v1::PullResponse resp;
    EXPECT_EQ(stub->Pull(&ctx, req, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  EXPECT_EQ(server.service().Snapshot().version(), 5u);
  EXPECT_TRUE(SameShard(before, CaptureShard(server.service())));
  server.Shutdown(std::chrono::milliseconds(200));
  std::filesystem::remove_all(co.dir);
}

// A checkpoint holds the model's size, so a restored server tells a
// coordinator that knows none (restarted too, before any worker joined)
// what the model is: the coordinator's layout follows from it, the shard
// confirms its range against that layout, and a worker of another model is
// refused at its join instead of pushing to shards of another size.
TEST(ShardAbuseRestored, ACoordinatorThatKnowsNoModelLearnsItFromARestoredServer) {
  TestCluster c(ClusterOptions{});
  ASSERT_TRUE(c.Start());  // no worker has joined: the coordinator knows no model size
  const CheckpointOptions co =
      WriteCheckpoint("hostile_model_size", ShardRange{0, kTotal}, 5, kTotal);
  ParameterServer server(RestoringServer(c, co));
  ASSERT_TRUE(server.Start().ok());
  ASSERT_EQ(server.restored_version(), std::optional<uint64_t>(5));
  for (int i = 0; i < 500 && !server.registered(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(server.registered());
  v1::JoinResponse join;
  const grpc::Status other = c.Join(kTotal + 128, &join);
  EXPECT_EQ(other.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << other.error_message();
  EXPECT_NE(other.error_message().find("differs from the cluster's " + std::to_string(kTotal)),
            std::string::npos)
      << other.error_message();
  const grpc::Status same = c.Join(kTotal, &join);
  ASSERT_TRUE(same.ok()) << same.error_message();
  EXPECT_EQ(join.view().shard_map().total_elements(), kTotal);
  for (int i = 0; i < 250 && server.service().range_unconfirmed(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the loop checks every 20 ms
  }
  EXPECT_FALSE(server.service().range_unconfirmed()) << "the layout confirms the restored range";
  server.Shutdown(std::chrono::milliseconds(200));
  std::filesystem::remove_all(co.dir);
}

// A checkpoint of another model (its size is in the file) is refused by the
// coordinator when the restored server registers: the server gives up at
// once with the coordinator's reason, instead of retrying for
// --register-timeout-s, and its shard serves nothing.
TEST(ShardAbuseRestored, ACheckpointOfAnotherModelEndsTheServerWhenItRegisters) {
  TestCluster c(ClusterOptions{});
  ASSERT_TRUE(c.Start());
  v1::JoinResponse join;
  ASSERT_TRUE(c.Join(kTotal, &join).ok());
  const CheckpointOptions co =
      WriteCheckpoint("hostile_other_model", ShardRange{0, 512}, 5, /*total_elements=*/512);
  ParameterServer server(RestoringServer(c, co));
  ASSERT_TRUE(server.Start().ok());
  for (int i = 0; i < 500 && server.fatal_status().ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const Status fatal = server.fatal_status();
  EXPECT_EQ(fatal.code(), StatusCode::kFailedPrecondition) << fatal.ToString();
  EXPECT_NE(fatal.message().find("holds a model of 512 elements, this coordinator one of " +
                                 std::to_string(kTotal)),
            std::string::npos)
      << fatal.ToString();
  EXPECT_NE(fatal.message().find("this server restored its shard from " + server.restored_from() +
                                 "; start it with this run's checkpoints, or without any"),
            std::string::npos)
      << fatal.ToString();
  EXPECT_FALSE(server.registered());
  server.Shutdown(std::chrono::milliseconds(200));
  std::filesystem::remove_all(co.dir);
}

// gRPC refuses a message over --max-message-mb before the handler runs.
TEST(ShardAbuseOversized, AMessageJustOverTheLimitIsResourceExhaustedAndTheServerCarriesOn) {
  TestCluster c(ClusterOptions{});
  ASSERT_TRUE(c.Start());
  ParameterServerOptions so;
  so.coordinator = c.coordinator_address();
  so.max_message_mb = 1;
  so.security = TransportSecurityOptions::Insecure();
  ParameterServer server(so);  // shard 0 again: the test talks to it directly
  ASSERT_TRUE(server.Start().ok());
  auto stub = v1::ParameterServer::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  v1::JoinResponse join;
  ASSERT_TRUE(c.Join(kTotal, &join).ok());
  auto call_push = [&](size_t message_bytes) {
    v1::PushRequest req;
    req.set_worker_id(join.worker_id());
    req.set_step(0);
    req.mutable_gradient()->set_codec(v1::CODEC_FP32);
    req.mutable_gradient()->set_length(kTotal);
    // Grow the data until the serialised request is exactly message_bytes.
    int64_t data = static_cast<int64_t>(message_bytes) - 16;
    for (int i = 0; i < 8; ++i) {  // converges in two or three rounds (varint widths)
      req.mutable_gradient()->set_data(std::string(static_cast<size_t>(data), '\0'));
      const int64_t size = static_cast<int64_t>(req.ByteSizeLong());
      if (size == static_cast<int64_t>(message_bytes)) break;
      data += static_cast<int64_t>(message_bytes) - size;
    }
    EXPECT_EQ(req.ByteSizeLong(), message_bytes);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::PushResponse resp;
    return stub->Push(&ctx, req, &resp);
  };
  const size_t limit = 1024 * 1024;
  grpc::Status over = call_push(limit + 1);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over.error_message();
  // At the limit the message arrives and is judged on its contents.
  grpc::Status at = call_push(limit);
  EXPECT_NE(at.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << at.error_message();
  EXPECT_FALSE(at.ok());
  // The server carries on: a valid init and a status call succeed.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::InitShardRequest init;
  init.set_worker_id(join.worker_id());
  *init.mutable_params() = Fp32Payload(RandomVector(kTotal, 8), 0);
  v1::InitShardResponse init_resp;
  grpc::Status s = stub->InitShard(&ctx, init, &init_resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(server.service().Snapshot().initialized());
  server.Shutdown(std::chrono::milliseconds(200));
}

}  // namespace
}  // namespace loco::test

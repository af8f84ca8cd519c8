// HeartbeatLoop against a scripted coordinator service on loopback (the
// piece under test is the loop; the service only answers as told): an
// answer of an older incarnation than one seen is ignored (no update, an
// UNAVAILABLE naming it, no expiry); a newer one is taken; NOT_FOUND
// expires the worker once, unless it comes with an older incarnation's
// trailer.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>

#include "client/heartbeat_loop.h"
#include "proto/loco.grpc.pb.h"
#include "rpc/incarnation_trailer.h"

namespace loco {
namespace {

class ScriptedCoordinator final : public v1::Coordinator::Service {
 public:
  std::atomic<uint64_t> incarnation{0};
  std::atomic<uint32_t> world{0};
  std::atomic<bool> forget{false};   // answer NOT_FOUND
  std::atomic<bool> trailer{false};  // with the incarnation as its trailer
  std::string raw_trailer;           // if set, sent instead (set before beating)

  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse* resp) override {
    if (trailer) SetIncarnationTrailer(ctx, incarnation);
    if (!raw_trailer.empty()) ctx->AddTrailingMetadata(kIncarnationTrailer, raw_trailer);
    if (forget) return grpc::Status(grpc::StatusCode::NOT_FOUND, "not a member");
    resp->set_epoch(1);
    resp->set_rank(0);
    resp->set_world_size(world);
    resp->set_incarnation(incarnation);
    return grpc::Status::OK;
  }
};

struct LoopOnLoopback {
  ScriptedCoordinator coordinator;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Coordinator::Stub> stub;
  int expiries = 0;

  LoopOnLoopback() {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&coordinator);
    server = builder.BuildAndStart();
    stub = v1::Coordinator::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                        grpc::InsecureChannelCredentials()));
  }
  ~LoopOnLoopback() {
    if (server) server->Shutdown();
  }
  HeartbeatCallbacks Callbacks() {
    HeartbeatCallbacks cb;
    cb.on_expired = [this] { ++expiries; };
    return cb;
  }
  // The loop of worker 42 once it has heard `incarnation` (sent as a
  // trailer too when `trailer`); null, and a failure, when it could not.
  std::unique_ptr<HeartbeatLoop> LoopThatHeard(uint64_t incarnation, bool trailer) {
    if (server == nullptr) {
      ADD_FAILURE() << "no scripted coordinator";
      return nullptr;
    }
    coordinator.incarnation = incarnation;
    coordinator.trailer = trailer;
    auto loop = std::make_unique<HeartbeatLoop>(stub.get(), 42, "", 1000, 5000, Callbacks());
    const grpc::Status s = loop->BeatOnce();
    if (!s.ok()) {
      ADD_FAILURE() << "the first heartbeat failed: " << s.error_message();
      return nullptr;
    }
    return loop;
  }
};

TEST(HeartbeatLoopTest, AnswersOfAnOlderIncarnationAreIgnored) {
  LoopOnLoopback l;
  ASSERT_NE(l.server, nullptr);
  ScriptedCoordinator& coordinator = l.coordinator;
  const int& expiries = l.expiries;
  uint32_t last_world = 0;
  int updates = 0;
  HeartbeatCallbacks cb = l.Callbacks();
  cb.current_step = [] { return uint64_t{0}; };
  cb.on_update = [&](const v1::HeartbeatResponse& r) {
    ++updates;
    last_world = r.world_size();
  };
  HeartbeatLoop loop(l.stub.get(), 42, "", /*interval_ms=*/1000, /*rpc_timeout_ms=*/5000, cb);

  coordinator.incarnation = 5;
  coordinator.world = 2;
  ASSERT_TRUE(loop.BeatOnce().ok());
  EXPECT_EQ(updates, 1);
  EXPECT_EQ(last_world, 2u);

  coordinator.incarnation = 3;  // a stale coordinator still answering
  coordinator.world = 1;
  const grpc::Status stale = loop.BeatOnce();
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(stale.error_message().find("older"), std::string::npos) << stale.error_message();
  EXPECT_EQ(updates, 1) << "the older incarnation's world was taken";
  EXPECT_EQ(last_world, 2u);
  EXPECT_EQ(expiries, 0);

  coordinator.incarnation = 7;  // restarted again: newer is taken
  coordinator.world = 3;
  ASSERT_TRUE(loop.BeatOnce().ok());
  EXPECT_EQ(updates, 2);
  EXPECT_EQ(last_world, 3u);

  coordinator.forget = true;
  EXPECT_EQ(loop.BeatOnce().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(expiries, 1);
}

TEST(HeartbeatLoopTest, ANotFoundOfAnOlderIncarnationDoesNotExpireTheWorker) {
  LoopOnLoopback l;
  auto loop = l.LoopThatHeard(5, /*trailer=*/true);
  ASSERT_NE(loop, nullptr);

  l.coordinator.incarnation = 3;  // a stale coordinator that never knew worker 42
  l.coordinator.forget = true;
  const grpc::Status stale = loop->BeatOnce();
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(stale.error_message().find("incarnation 3, older than 5"), std::string::npos)
      << stale.error_message();
  EXPECT_EQ(l.expiries, 0);

  l.coordinator.incarnation = 5;  // the coordinator that admitted it: expired
  EXPECT_EQ(loop->BeatOnce().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(l.expiries, 1);
}

TEST(HeartbeatLoopTest, ANotFoundWithoutATrailerExpiresTheWorkerAsBefore) {
  LoopOnLoopback l;
  auto loop = l.LoopThatHeard(5, /*trailer=*/false);
  ASSERT_NE(loop, nullptr);
  l.coordinator.forget = true;  // a coordinator that sends no trailer
  EXPECT_EQ(loop->BeatOnce().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(l.expiries, 1);
}

TEST(HeartbeatLoopTest, AMalformedTrailerIsTakenAsNone) {
  LoopOnLoopback l;
  auto loop = l.LoopThatHeard(5, /*trailer=*/false);
  ASSERT_NE(loop, nullptr);
  l.coordinator.raw_trailer = "3x";  // not a number: no incarnation to compare
  l.coordinator.forget = true;
  EXPECT_EQ(loop->BeatOnce().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(l.expiries, 1);
}

// A worker that left on its own (LeaveNow, at exit) and whose heartbeat
// then met the coordinator's NOT_FOUND logged that it "has expired and
// must join again": it is not expired, and the loop stops quietly.
TEST(HeartbeatLoopTest, ANotFoundAfterTheWorkerLeftIsNoExpiry) {
  LoopOnLoopback l;
  ASSERT_NE(l.server, nullptr);
  std::atomic<bool> left{false};
  HeartbeatCallbacks cb = l.Callbacks();
  cb.has_left = [&left] { return left.load(); };
  HeartbeatLoop loop(l.stub.get(), 42, "", /*interval_ms=*/1000, /*rpc_timeout_ms=*/5000, cb);
  ASSERT_TRUE(loop.BeatOnce().ok());
  left = true;
  l.coordinator.forget = true;  // the leave was taken
  EXPECT_EQ(loop.BeatOnce().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(l.expiries, 0);
  left = false;  // the same answer to a worker that has not left expires it
  EXPECT_EQ(loop.BeatOnce().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(l.expiries, 1);
}

}  // namespace
}  // namespace loco

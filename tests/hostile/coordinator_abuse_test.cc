// Absurd coordinator requests over a real loopback channel: each is refused
// with a precise code and the cluster view (epoch, members, model size,
// shard map, addresses) is byte-identical afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "server/coordinator/membership.h"
#include "tests/hostile/hostile_state.h"

namespace loco::test {
namespace {

class CoordinatorAbuse : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.num_shards = 2;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_TRUE(cluster_->Start());
  }

  // Runs `call` (which returns the RPC's status) and expects `code` with the
  // view unchanged.
  void ExpectRefused(const std::string& what, grpc::StatusCode code,
                     const std::function<grpc::Status(grpc::ClientContext*)>& call) {
    SCOPED_TRACE(what);
    const std::string before = CaptureView(cluster_->coordinator());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status s = call(&ctx);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_FALSE(s.error_message().empty());
    EXPECT_EQ(before, CaptureView(cluster_->coordinator()));
  }

  grpc::Status Join(grpc::ClientContext* ctx, const std::string& name, uint64_t total) {
    v1::JoinRequest req;
    req.set_name(name);
    req.set_total_elements(total);
    v1::JoinResponse resp;
    return cluster_->coordinator().Join(ctx, req, &resp);
  }
  grpc::Status Register(grpc::ClientContext* ctx, uint32_t shard, const std::string& address) {
    v1::RegisterServerRequest req;
    req.set_shard_id(shard);
    req.set_address(address);
    v1::RegisterServerResponse resp;
    return cluster_->coordinator().RegisterServer(ctx, req, &resp);
  }

  std::unique_ptr<TestCluster> cluster_;
};

TEST_F(CoordinatorAbuse, AbsurdModelSizesAndNamesAreRefusedBeforeTheFirstJoin) {
  using grpc::StatusCode;
  ExpectRefused("model size 0", StatusCode::INVALID_ARGUMENT,
                [&](auto* ctx) { return Join(ctx, "w", 0); });
  ExpectRefused("model size 2^64-1", StatusCode::INVALID_ARGUMENT,
                [&](auto* ctx) { return Join(ctx, "w", ~uint64_t{0}); });
  // Two shards hold at most 2 * kMaxShardElements: one more is refused.
  ExpectRefused("one element over two shards' worth", StatusCode::INVALID_ARGUMENT, [&](auto* ctx) {
    return Join(ctx, "w", 2 * Membership::kMaxShardElements + 1);
  });
  ExpectRefused("a 4 KiB name", StatusCode::INVALID_ARGUMENT,
                [&](auto* ctx) { return Join(ctx, std::string(4096, 'n'), 1000); });
  // The refusals fixed nothing: the first valid join still picks the size.
  v1::JoinResponse join;
  ASSERT_TRUE(cluster_->Join(1000, &join).ok());
  EXPECT_EQ(join.view().shard_map().total_elements(), 1000u);
  ExpectRefused("a different size after the first join", StatusCode::FAILED_PRECONDITION,
                [&](auto* ctx) { return Join(ctx, "w", 1001); });
}

TEST_F(CoordinatorAbuse, BadRegistrationsAndUnknownWorkersAreRefused) {
  using grpc::StatusCode;
  v1::JoinResponse join;
  ASSERT_TRUE(cluster_->Join(1000, &join).ok());
  ExpectRefused("shard id out of range", StatusCode::INVALID_ARGUMENT,
                [&](auto* ctx) { return Register(ctx, 2, "127.0.0.1:5000"); });
  ExpectRefused("shard id 2^32-1", StatusCode::INVALID_ARGUMENT,
                [&](auto* ctx) { return Register(ctx, ~uint32_t{0}, "127.0.0.1:5000"); });
  for (const std::string& bad : std::vector<std::string>{"", "no-port", "h:", ":5000", "h:0", "h:65536", "h:99999999",
                                "h:12a", std::string(2000, 'h') + ":1"}) {
    ExpectRefused("address '" + bad.substr(0, 20) + "'", StatusCode::INVALID_ARGUMENT,
                  [&](auto* ctx) { return Register(ctx, 1, bad); });
  }
  ExpectRefused("heartbeat of a stranger", StatusCode::NOT_FOUND, [&](auto* ctx) {
    v1::HeartbeatRequest req;
    req.set_worker_id(join.worker_id() + 1000);
    v1::HeartbeatResponse resp;
    return cluster_->coordinator().Heartbeat(ctx, req, &resp);
  });
  // Id 0 names no worker: the request is malformed, not about a stranger.
  ExpectRefused("leave of worker 0", StatusCode::INVALID_ARGUMENT, [&](auto* ctx) {
    v1::LeaveRequest req;
    v1::LeaveResponse resp;
    return cluster_->coordinator().Leave(ctx, req, &resp);
  });
  ExpectRefused("heartbeat of worker 0", StatusCode::INVALID_ARGUMENT, [&](auto* ctx) {
    v1::HeartbeatRequest req;
    v1::HeartbeatResponse resp;
    return cluster_->coordinator().Heartbeat(ctx, req, &resp);
  });
  ExpectRefused("participants of a shard that does not exist", StatusCode::INVALID_ARGUMENT,
                [&](auto* ctx) {
                  v1::StepParticipantsRequest req;
                  req.set_shard_id(9);
                  v1::StepParticipantsResponse resp;
                  return cluster_->coordinator().GetStepParticipants(ctx, req, &resp);
                });
  ExpectRefused("participants of a step no shard can have opened", StatusCode::FAILED_PRECONDITION,
                [&](auto* ctx) {
                  v1::StepParticipantsRequest req;
                  req.set_step(1000000);
                  v1::StepParticipantsResponse resp;
                  return cluster_->coordinator().GetStepParticipants(ctx, req, &resp);
                });
  // A valid re-registration is accepted (the refusals were about the values).
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  EXPECT_TRUE(Register(&ctx, 1, cluster_->server_object(1).advertised_address()).ok());
}

}  // namespace
}  // namespace loco::test

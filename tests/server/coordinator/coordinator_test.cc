// The Coordinator service through gRPC: what workers and servers see.
#include <gtest/gtest.h>

#include "tests/cluster/test_cluster.h"

namespace loco::test {
namespace {

TEST(Coordinator, JoinReturnsTheReadyViewWithEveryServersAddress) {
  ClusterOptions o;
  o.num_shards = 3;
  o.heartbeat_interval = std::chrono::milliseconds(123);
  TestCluster c(o);
  ASSERT_TRUE(c.Start());
  v1::JoinResponse a, b;
  ASSERT_TRUE(c.Join(1000, &a).ok());
  ASSERT_TRUE(c.Join(1000, &b).ok());
  EXPECT_EQ(b.worker_id(), a.worker_id() + 1);
  EXPECT_EQ(b.rank(), 1u);
  EXPECT_EQ(b.world_size(), 2u);
  EXPECT_EQ(b.heartbeat_interval_ms(), 123u);
  const auto& view = b.view();
  EXPECT_TRUE(view.ready());
  EXPECT_EQ(view.epoch(), 2u);
  ASSERT_EQ(view.worker_ids_size(), 2);
  EXPECT_EQ(view.shard_map().total_elements(), 1000u);
  EXPECT_EQ(view.shard_map().block_size(), 128u);
  ASSERT_EQ(view.shard_map().shards_size(), 3);
  uint64_t next = 0;
  for (uint32_t k = 0; k < 3; ++k) {
    const auto& s = view.shard_map().shards(static_cast<int>(k));
    EXPECT_EQ(s.shard_id(), k);
    EXPECT_EQ(s.offset(), next);
    EXPECT_EQ(s.address(), c.server_object(k).advertised_address());
    next = s.offset() + s.length();
  }
  EXPECT_EQ(next, 1000u);

  v1::JoinResponse mismatch;
  EXPECT_EQ(c.Join(999, &mismatch).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(c.Heartbeat(999).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(c.Leave(999).error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(c.Leave(a.worker_id()).ok());
  EXPECT_EQ(c.Heartbeat(a.worker_id()).error_code(), grpc::StatusCode::NOT_FOUND);

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::StepParticipantsRequest req;
  req.set_shard_id(3);
  v1::StepParticipantsResponse resp;
  EXPECT_EQ(c.coordinator().GetStepParticipants(&ctx, req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace loco::test

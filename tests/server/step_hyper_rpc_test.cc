// Per-step hyper-parameters through real gRPC servers on loopback: a push
// carries them (PushRequest.hyper, filled per shard by the client's
// FillShardHyper) as a unary Push, as an in-order PushStream and as a
// placed PushStream, and both shards step their part of the groups with
// their values, against AdamW in double over the whole model. A push
// whose hyper-parameters disagree with the step's is refused over the
// stream as over the unary call, and changes nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "client/placed_push_stream.h"
#include "client/push_chunks.h"
#include "client/step_hyper.h"
#include "tests/cluster/test_cluster.h"
#include "tests/server/reference.h"

namespace loco::test {
namespace {

constexpr uint64_t kHyperRpcTotal = 2000;

enum class Transport { kUnary, kInOrderStream, kPlacedStream };

const char* NameOf(Transport t) {
  switch (t) {
    case Transport::kUnary: return "unary Push";
    case Transport::kInOrderStream: return "in-order PushStream";
    case Transport::kPlacedStream: return "placed PushStream";
  }
  return "?";
}

AdamWParams Fp32(const HyperGroup& g) {
  AdamWParams p;
  p.lr = static_cast<float>(g.lr);
  p.beta1 = static_cast<float>(g.beta1);
  p.beta2 = static_cast<float>(g.beta2);
  p.eps = static_cast<float>(g.eps);
  p.weight_decay = static_cast<float>(g.weight_decay);
  return p;
}

std::vector<ReferenceGroupedAdamW::Group> ReferenceGroups(const std::vector<HyperGroup>& groups) {
  std::vector<ReferenceGroupedAdamW::Group> out;
  for (const HyperGroup& g : groups) out.push_back({g.begin, g.end, Fp32(g)});
  return out;
}

class StepHyperRpc : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.num_shards = 2;
    o.shard.hyper.lr = 1e-2f;  // the flags: not what these steps use
    o.shard.return_path.codec = PullCodec::kFp32;
    cluster_ = std::make_unique<TestCluster>(o);
    ASSERT_TRUE(cluster_->Start());
    for (int i = 0; i < 2; ++i) {
      v1::JoinResponse join;
      ASSERT_TRUE(cluster_->Join(kHyperRpcTotal, &join).ok());
      workers_.push_back(join.worker_id());
    }
    init_ = RandomVector(kHyperRpcTotal, 11);
    for (uint32_t k = 0; k < 2; ++k) {
      ranges_.push_back(cluster_->Range(k));
      const std::vector<float> part(init_.begin() + ranges_[k].offset,
                                    init_.begin() + ranges_[k].offset + ranges_[k].length);
      ASSERT_TRUE(cluster_->InitShard(k, workers_[0], Fp32Payload(part, ranges_[k].offset)).ok());
      channels_.push_back(grpc::CreateChannel(cluster_->server_object(k).address(),
                                              grpc::InsecureChannelCredentials()));
    }
    // Two shards, and a group that straddles their boundary.
    ASSERT_GT(ranges_[0].length, 700u);
    ASSERT_LT(ranges_[0].length, 1500u);
  }

  // Worker `w`'s push of `gradient` (the whole model's) to shard k for
  // `step`, with the shard's part of `groups`, over `transport`.
  grpc::Status Push(uint32_t k, size_t w, uint64_t step, const std::vector<float>& gradient,
                    const std::vector<HyperGroup>& groups, Transport transport,
                    v1::PushResponse* resp) {
    const ShardRange range = ranges_[k];
    v1::PushRequest req;
    req.set_worker_id(workers_[w]);
    req.set_shard_id(k);
    req.set_step(step);
    const std::vector<float> part(gradient.begin() + range.offset,
                                  gradient.begin() + range.offset + range.length);
    *req.mutable_gradient() = Fp32Payload(part, range.offset);
    const Status filled = FillShardHyper(groups, range.offset, range.length, req.mutable_hyper());
    EXPECT_TRUE(filled.ok()) << filled.ToString();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    switch (transport) {
      case Transport::kUnary: return cluster_->server(k).Push(&ctx, req, resp);
      case Transport::kInOrderStream: return SendPushInChunks(channels_[k], &ctx, req, 1024, resp);
      case Transport::kPlacedStream: {
        // The end of the shard first, as a worker sends it.
        PlacedPushStream stream(channels_[k], &ctx, req, resp);
        const size_t bytes = req.gradient().data().size(), half = bytes / 2;
        if (stream.Write(half, bytes - half, 0, 0)) stream.Write(0, half, 0, 0);
        return stream.Finish();
      }
    }
    return grpc::Status(grpc::StatusCode::INTERNAL, "unknown transport");
  }

  std::vector<double> Slice(const std::vector<double>& all, uint32_t k) const {
    return {all.begin() + ranges_[k].offset,
            all.begin() + ranges_[k].offset + ranges_[k].length};
  }

  std::unique_ptr<TestCluster> cluster_;
  std::vector<uint64_t> workers_;
  std::vector<float> init_;
  std::vector<ShardRange> ranges_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
};

TEST_F(StepHyperRpc, EveryTransportCarriesTheStepsHyperParameters) {
  std::vector<HyperGroup> groups = {{0, 700, 1e-2, 0.9, 0.999, 1e-8, 0.1},
                                    {700, 1500, 3e-3, 0.8, 0.99, 1e-6, 0.0},
                                    {1500, kHyperRpcTotal, 5e-3, 0.9, 0.95, 1e-7, 0.05}};
  ReferenceGroupedAdamW reference(init_);
  // Each step's two pushes per shard go by two of the three transports.
  const Transport plan[3][2] = {{Transport::kUnary, Transport::kInOrderStream},
                                {Transport::kPlacedStream, Transport::kUnary},
                                {Transport::kInOrderStream, Transport::kPlacedStream}};
  for (uint64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    if (step == 1) groups[1].lr = 1e-3;  // a scheduler's next value for group 1
    if (step == 2) groups[0].weight_decay = 0.0;
    ASSERT_TRUE(ValidateHyperGroups(groups, kHyperRpcTotal).ok());
    const std::vector<float> gradients[2] = {RandomVector(kHyperRpcTotal, 30 + 2 * step),
                                             RandomVector(kHyperRpcTotal, 31 + 2 * step)};
    for (uint32_t k = 0; k < 2; ++k) {
      for (size_t w = 0; w < 2; ++w) {
        SCOPED_TRACE(std::string(NameOf(plan[step][w])) + " to shard " + std::to_string(k));
        v1::PushResponse resp;
        const grpc::Status s = Push(k, w, step, gradients[w], groups, plan[step][w], &resp);
        ASSERT_TRUE(s.ok()) << s.error_message();
        EXPECT_EQ(resp.version(), w == 0 ? step : step + 1);
      }
    }
    std::vector<double> mean(kHyperRpcTotal);
    for (size_t i = 0; i < kHyperRpcTotal; ++i) {
      mean[i] = (double(gradients[0][i]) + double(gradients[1][i])) / 2;
    }
    reference.Step(mean, ReferenceGroups(groups));
    for (uint32_t k = 0; k < 2; ++k) {
      const ShardStore store = cluster_->Snapshot(k);
      EXPECT_EQ(store.version(), step + 1);
      EXPECT_TRUE(AllNear(store.params(), Slice(reference.params(), k), 1e-5)) << "shard " << k;
      EXPECT_TRUE(AllNear(store.m(), Slice(reference.m(), k), 1e-6)) << "shard " << k;
      EXPECT_TRUE(AllNear(store.v(), Slice(reference.v(), k), 1e-6)) << "shard " << k;
    }
  }
}

TEST_F(StepHyperRpc, ADisagreeingPushIsRefusedOnEveryTransportAndChangesNothing) {
  const std::vector<HyperGroup> groups = {{0, kHyperRpcTotal, 1e-3, 0.9, 0.999, 1e-8, 0.0}};
  std::vector<HyperGroup> other = groups;
  other[0].lr = 2e-3;
  const auto a = RandomVector(kHyperRpcTotal, 40);
  v1::PushResponse resp;
  ASSERT_TRUE(Push(1, 0, 0, a, groups, Transport::kUnary, &resp).ok());
  const ShardStore before = cluster_->Snapshot(1);
  for (Transport t : {Transport::kUnary, Transport::kInOrderStream, Transport::kPlacedStream}) {
    SCOPED_TRACE(NameOf(t));
    const grpc::Status s = Push(1, 1, 0, RandomVector(kHyperRpcTotal, 41), other, t, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    const std::string expected = "lr 0.001 vs 0.002 on [" + std::to_string(ranges_[1].offset) +
                                 ", " + std::to_string(kHyperRpcTotal) + ")";
    EXPECT_NE(s.error_message().find("the workers of step 0 disagree"), std::string::npos)
        << s.error_message();
    EXPECT_NE(s.error_message().find(expected), std::string::npos) << s.error_message();
    const ShardStore after = cluster_->Snapshot(1);
    EXPECT_EQ(after.version(), 0u);
    EXPECT_EQ(std::memcmp(after.params().data(), before.params().data(),
                          before.params().size() * 4), 0);
    EXPECT_EQ(cluster_->service(1).pending_pushes(), 1u);
  }
  // The agreeing push completes the step.
  const auto b = RandomVector(kHyperRpcTotal, 42);
  ASSERT_TRUE(Push(1, 1, 0, b, groups, Transport::kPlacedStream, &resp).ok());
  EXPECT_EQ(resp.version(), 1u);
  std::vector<double> mean(kHyperRpcTotal);
  for (size_t i = 0; i < kHyperRpcTotal; ++i) mean[i] = (double(a[i]) + double(b[i])) / 2;
  ReferenceGroupedAdamW reference(init_);
  reference.Step(mean, ReferenceGroups(groups));
  EXPECT_TRUE(AllNear(cluster_->Snapshot(1).params(), Slice(reference.params(), 1), 1e-5));
}

}  // namespace
}  // namespace loco::test

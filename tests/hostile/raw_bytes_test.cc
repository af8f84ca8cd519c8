// Bytes that are not protobuf, sent with grpc::GenericStub to every method of
// both services, and hand-built (valid and invalid) protobuf from a client
// with no generated code: gRPC's deserialisation refuses the garbage before
// any handler runs, and nothing changes anywhere.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/hostile/hostile_state.h"
#include "tests/server/reference.h"

namespace loco::test {
namespace {

// Each one fails proto3 parsing whatever the message type: a truncated tag,
// field number 0, a length-delimited field longer than the message, an
// unterminated group, a varint longer than ten bytes.
std::vector<std::string> Garbage() {
  return {std::string("\xff", 1),
          std::string("\x00\x01", 2),
          std::string("\x22\x7f\x01\x02", 4),
          std::string("\x0b\x08\x01", 3),
          std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12),
          std::string("\x22\xff\xff\xff\xff\x0f", 6)};
}

class RawBytes : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Prime(&p_)); }
  TestCluster& c() { return *p_.cluster; }
  std::string server_address() { return c().server_object(0).address(); }
  PrimedCluster p_;
};

TEST_F(RawBytes, GarbageToEveryMethodIsRefusedByDeserialisationAndChangesNothing) {
  const std::vector<std::string> shard_methods = {
      "/loco.v1.ParameterServer/InitShard", "/loco.v1.ParameterServer/Push",
      "/loco.v1.ParameterServer/Pull", "/loco.v1.ParameterServer/ShardStatus",
      "/loco.v1.ParameterServer/PushStream"};
  const std::vector<std::string> coordinator_methods = {
      "/loco.v1.Coordinator/RegisterServer", "/loco.v1.Coordinator/Join",
      "/loco.v1.Coordinator/Leave",          "/loco.v1.Coordinator/Heartbeat",
      "/loco.v1.Coordinator/GetClusterView", "/loco.v1.Coordinator/GetStepParticipants"};
  const ShardState shard_before = CaptureShard(c().service(0));
  const std::string view_before = CaptureView(c().coordinator());
  for (const std::string& bytes : Garbage()) {
    // The garbage really is not protobuf for any of the request types.
    v1::PushRequest push;
    ASSERT_FALSE(push.ParseFromString(bytes));
    for (const auto& method : shard_methods) {
      SCOPED_TRACE(method);
      grpc::Status s = RawUnaryCall(server_address(), method, bytes);
      EXPECT_TRUE(s.error_code() == grpc::StatusCode::INTERNAL ||
                  s.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
          << s.error_code() << " " << s.error_message();
    }
    for (const auto& method : coordinator_methods) {
      SCOPED_TRACE(method);
      grpc::Status s = RawUnaryCall(c().coordinator_address(), method, bytes);
      EXPECT_TRUE(s.error_code() == grpc::StatusCode::INTERNAL ||
                  s.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
          << s.error_code() << " " << s.error_message();
    }
  }
  EXPECT_TRUE(SameShard(shard_before, CaptureShard(c().service(0))));
  EXPECT_EQ(view_before, CaptureView(c().coordinator()));
  // The servers carry on.
  v1::ShardStatusResponse status;
  ASSERT_TRUE(c().ShardStatus(0, &status).ok());
  EXPECT_EQ(status.pending_pushes(), 1u);
}

// A push encoded by hand from the wire format: field numbers from
// proto/loco.proto, no generated code.
std::string HandBuiltPush(uint64_t worker, uint32_t shard, uint64_t step, const v1::Payload& g) {
  std::string payload = VarintField(1, g.codec()) + VarintField(2, g.bits()) +
                        VarintField(3, g.block_size()) + VarintField(5, g.length()) +
                        BytesField(6, g.scales()) + BytesField(7, g.data());
  if (g.offset() != 0) payload += VarintField(4, g.offset());
  return VarintField(1, worker) + VarintField(2, shard) + VarintField(3, step) +
         BytesField(4, payload);
}

TEST_F(RawBytes, HandBuiltProtobufIsValidatedLikeAnyOtherClient) {
  const std::string push = "/loco.v1.ParameterServer/Push";
  // The encoding is right: the generated parser reads back what was meant.
  v1::PushRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(HandBuiltPush(p_.workers[1], 0, 1, p_.valid)));
  ASSERT_EQ(parsed.worker_id(), p_.workers[1]);
  ASSERT_EQ(parsed.gradient().data(), p_.valid.data());

  const ShardState before = CaptureShard(c().service(0));
  struct Case {
    std::string what;
    std::string bytes;
    grpc::StatusCode code;
  };
  v1::Payload huge_scale = p_.valid;
  const float big = 1e30f;
  std::memcpy(huge_scale.mutable_scales()->data(), &big, 4);
  v1::Payload short_data = p_.valid;
  short_data.mutable_data()->pop_back();
  const std::vector<Case> cases = {
      {"non-member worker", HandBuiltPush(999, 0, 1, p_.valid),
       grpc::StatusCode::FAILED_PRECONDITION},
      {"worker id 0", HandBuiltPush(0, 0, 1, p_.valid), grpc::StatusCode::FAILED_PRECONDITION},
      {"wrong shard", HandBuiltPush(p_.workers[1], 4, 1, p_.valid), grpc::StatusCode::NOT_FOUND},
      {"step far ahead", HandBuiltPush(p_.workers[1], 0, ~uint64_t{0}, p_.valid),
       grpc::StatusCode::FAILED_PRECONDITION},
      {"replayed step", HandBuiltPush(p_.workers[1], 0, 0, p_.valid),
       grpc::StatusCode::FAILED_PRECONDITION},
      {"absurd scale", HandBuiltPush(p_.workers[1], 0, 1, huge_scale),
       grpc::StatusCode::INVALID_ARGUMENT},
      {"short data", HandBuiltPush(p_.workers[1], 0, 1, short_data),
       grpc::StatusCode::INVALID_ARGUMENT},
      // No gradient at all: an empty payload claims [0, 0).
      {"no gradient", VarintField(1, p_.workers[1]) + VarintField(3, 1),
       grpc::StatusCode::INVALID_ARGUMENT},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    grpc::Status s = RawUnaryCall(server_address(), push, k.bytes);
    EXPECT_EQ(s.error_code(), k.code) << s.error_message();
    EXPECT_FALSE(s.error_message().empty());
    EXPECT_TRUE(SameShard(before, CaptureShard(c().service(0))));
  }
  // The same hand-built encoding from a participant is accepted and
  // completes step 1 (so the refusals above were about their contents).
  grpc::Status ok = RawUnaryCall(server_address(), push, HandBuiltPush(p_.workers[1], 0, 1, p_.valid));
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(c().Snapshot(0).version(), 2u);
}

}  // namespace
}  // namespace loco::test

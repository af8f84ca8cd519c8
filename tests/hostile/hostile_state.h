// What a hostile request must not change, captured before and after it:
// a shard's params, m, v, version, initialisation, held pushes and return
// replica, and the coordinator's cluster view. Comparisons are byte for byte.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <memory>

#include "proto/loco.grpc.pb.h"
#include "server/shard_service.h"
#include "tests/cluster/test_cluster.h"

namespace loco::test {

// A one-shard cluster on loopback (block 128, 1000 elements: a short last
// block) with two members, the shard initialised, one step applied (so m
// and v are non-zero) and one push held for the open step 1 (from
// workers[0]): every piece of state a request could disturb is populated.
struct PrimedCluster {
  static constexpr uint64_t kTotal = 1000;
  std::unique_ptr<TestCluster> cluster;
  std::vector<uint64_t> workers;
  v1::Payload valid;  // a valid step-1 gradient for workers[1]
};
::testing::AssertionResult Prime(PrimedCluster* out);

struct ShardState {
  std::vector<float> params, m, v, replica;
  uint64_t version = 0;
  bool initialized = false;
  uint32_t pending = 0;
};

ShardState CaptureShard(const ShardService& service);
::testing::AssertionResult SameShard(const ShardState& before, const ShardState& after);

// The coordinator's view as the wire shows it (serialised bytes compare
// epoch, members, model size and every shard's range and address).
std::string CaptureView(v1::Coordinator::Stub& coordinator);

// A unary call with `request_bytes` sent as they are (no serialisation) to
// `method` ("/loco.v1.ParameterServer/Push"); waits at most 10 s for the
// answer. The response bytes are ignored.
grpc::Status RawUnaryCall(const std::string& address, const std::string& method,
                          const std::string& request_bytes);

// Hand-built protobuf encoding (wire format only, no generated code), for a
// client that speaks the contract but not our libraries.
std::string Varint(uint64_t v);
std::string VarintField(uint32_t field, uint64_t v);
std::string BytesField(uint32_t field, const std::string& bytes);

}  // namespace loco::test

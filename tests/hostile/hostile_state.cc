#include "tests/hostile/hostile_state.h"

#include "tests/server/reference.h"

#include <grpcpp/generic/generic_stub.h>

#include <chrono>
#include <cstring>
#include <future>

namespace loco::test {
namespace {

bool SameBytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

}  // namespace

::testing::AssertionResult Prime(PrimedCluster* out) {
  ClusterOptions o;
  o.shard.hyper.lr = 1e-2f;
  o.shard.return_path.codec = PullCodec::kFp32;
  out->cluster = std::make_unique<TestCluster>(o);
  if (auto started = out->cluster->Start(); !started) return started;
  for (int i = 0; i < 2; ++i) {
    v1::JoinResponse join;
    if (auto s = out->cluster->Join(PrimedCluster::kTotal, &join); !s.ok()) {
      return ::testing::AssertionFailure() << "join: " << s.error_message();
    }
    out->workers.push_back(join.worker_id());
  }
  auto& c = *out->cluster;
  if (auto s = c.InitShard(0, out->workers[0], Fp32Payload(RandomVector(PrimedCluster::kTotal, 11), 0));
      !s.ok()) {
    return ::testing::AssertionFailure() << "init: " << s.error_message();
  }
  for (size_t w = 0; w < 2; ++w) {
    const auto p = QuantPayload(RandomVector(PrimedCluster::kTotal, 20 + w), 0, 4, 128);
    if (auto s = c.Push(0, out->workers[w], 0, p); !s.ok()) {
      return ::testing::AssertionFailure() << "push step 0: " << s.error_message();
    }
  }
  const auto pending = QuantPayload(RandomVector(PrimedCluster::kTotal, 30), 0, 4, 128);
  if (auto s = c.Push(0, out->workers[0], 1, pending); !s.ok()) {
    return ::testing::AssertionFailure() << "push step 1: " << s.error_message();
  }
  if (c.service(0).pending_pushes() != 1 || c.Snapshot(0).version() != 1) {
    return ::testing::AssertionFailure() << "the shard is not at version 1 with one push held";
  }
  out->valid = QuantPayload(RandomVector(PrimedCluster::kTotal, 31), 0, 4, 128);
  return ::testing::AssertionSuccess();
}

ShardState CaptureShard(const ShardService& service) {
  ShardStore s = service.Snapshot();
  ShardState st;
  st.params = s.params();
  st.m = s.m();
  st.v = s.v();
  st.replica = service.ReturnReplica();
  st.version = s.version();
  st.initialized = s.initialized();
  st.pending = service.pending_pushes();
  return st;
}

::testing::AssertionResult SameShard(const ShardState& a, const ShardState& b) {
  if (!SameBytes(a.params, b.params)) return ::testing::AssertionFailure() << "params changed";
  if (!SameBytes(a.m, b.m)) return ::testing::AssertionFailure() << "m changed";
  if (!SameBytes(a.v, b.v)) return ::testing::AssertionFailure() << "v changed";
  if (!SameBytes(a.replica, b.replica)) return ::testing::AssertionFailure() << "replica changed";
  if (a.version != b.version) {
    return ::testing::AssertionFailure() << "version " << a.version << " -> " << b.version;
  }
  if (a.initialized != b.initialized) return ::testing::AssertionFailure() << "initialised";
  if (a.pending != b.pending) {
    return ::testing::AssertionFailure() << "pending pushes " << a.pending << " -> " << b.pending;
  }
  return ::testing::AssertionSuccess();
}

std::string CaptureView(v1::Coordinator::Stub& coordinator) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ClusterView view;
  grpc::Status s = coordinator.GetClusterView(&ctx, v1::GetClusterViewRequest(), &view);
  if (!s.ok()) return "error: " + s.error_message();
  std::string bytes;
  view.SerializeToString(&bytes);
  return bytes;
}

grpc::Status RawUnaryCall(const std::string& address, const std::string& method,
                          const std::string& request_bytes) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  auto result = done.get_future();
  // The context's deadline ends the call; the extra second covers delivery.
  if (result.wait_for(std::chrono::seconds(11)) != std::future_status::ready) {
    ctx.TryCancel();
    result.wait();  // the callback always runs once the call is cancelled
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "raw call never completed");
  }
  return result.get();
}

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string VarintField(uint32_t field, uint64_t v) { return Varint(uint64_t{field} << 3) + Varint(v); }

std::string BytesField(uint32_t field, const std::string& bytes) {
  return Varint((uint64_t{field} << 3) | 2) + Varint(bytes.size()) + bytes;
}

}  // namespace loco::test

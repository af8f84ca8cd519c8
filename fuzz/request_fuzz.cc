// Fuzz target: bytes -> one ParameterServer request (PushRequest,
// InitShardRequest, PullRequest or ShardStatusRequest) -> ShardService's Do*
// handler, on a fresh in-process service whose coordinator is a fake on
// loopback (fake_coordinator.h: members {1, 2}, one shard of 300 elements).
//
// Input: byte 0 picks the request (bits 0-1: push, init, pull, status) and
// the shard's starting state (bits 2-3: initialised with one push of worker 1
// held for step 0; uninitialised; restored from a checkpoint at version 5,
// so that pushes ahead of it may fast-forward); the rest is the request's
// protobuf bytes.
//
// Invariants (a violation aborts, which libFuzzer reports as a crash):
// * no crash, no sanitizer report, no hang (pulls are asked not to wait);
// * a refused request leaves params, m, v, version, initialisation and the
//   held pushes byte-identical, and says why;
// * the shard never holds more pushes than the step has participants (2),
//   and one request completes at most one step, except that a restored shard
//   may fast-forward, and then only to the step a participant pushed and no
//   further than the coordinator allows (one step past its newest).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz/fake_coordinator.h"
#include "fuzz/require.h"
#include "security/transport_security.h"
#include "server/shard_service.h"

namespace {

using loco::fuzz::FakeCoordinator;

using loco::fuzz::Require;

struct Env {
  FakeCoordinator coordinator;
  std::unique_ptr<loco::CoordinatorClient> client;
  Env() {
    auto security = loco::TransportSecurity::Load(loco::TransportSecurityOptions::Insecure(),
                                                  loco::TransportRole::kClient);
    Require(security.ok(), "plaintext client security");
    client = std::make_unique<loco::CoordinatorClient>(coordinator.address(),
                                                       std::chrono::milliseconds(5000));
    client->Connect(**security);
  }
};

// One process-wide environment: libFuzzer calls the target many times in one
// process, and the fake coordinator's port is the expensive part.
Env& TheEnv() {
  static Env* env = new Env();  // never destroyed: gRPC may still use it at exit
  return *env;
}

struct State {
  std::vector<float> params, m, v;
  uint64_t version = 0;
  bool initialized = false;
  uint32_t pending = 0;
  bool operator==(const State& o) const {
    auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
    };
    return same(params, o.params) && same(m, o.m) && same(v, o.v) && version == o.version &&
           initialized == o.initialized && pending == o.pending;
  }
};

State Capture(const loco::ShardService& s) {
  loco::ShardStore store = s.Snapshot();
  return {store.params(), store.m(), store.v(), store.version(), store.initialized(),
          s.pending_pushes()};
}

loco::v1::Payload Fp32(float value) {
  loco::v1::Payload p;
  p.set_codec(loco::v1::CODEC_FP32);
  p.set_length(FakeCoordinator::kTotal);
  std::vector<float> v(FakeCoordinator::kTotal, value);
  p.set_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  TheEnv();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int kind = data[0] & 3;
  const int start = (data[0] >> 2) & 3;
  Env& env = TheEnv();
  loco::ShardServiceOptions options;
  options.max_pull_wait = std::chrono::milliseconds(1);
  loco::ShardService service(options, env.client.get());
  if (start == 0) {
    loco::v1::InitShardRequest init;
    init.set_worker_id(1);
    *init.mutable_params() = Fp32(0.5f);
    loco::v1::InitShardResponse init_resp;
    Require(service.DoInitShard(init, &init_resp).ok(), "the seed init");
    loco::v1::PushRequest push;
    push.set_worker_id(1);
    *push.mutable_gradient() = Fp32(0.25f);
    loco::v1::PushResponse push_resp;
    Require(service.DoPush(&push, &push_resp).ok(), "the seed push");
  } else if (start == 2) {
    loco::ShardCheckpoint c;
    c.range = loco::ShardRange{0, FakeCoordinator::kTotal};
    c.version = 5;
    c.params.assign(FakeCoordinator::kTotal, 0.5f);
    c.m.assign(FakeCoordinator::kTotal, 0.01f);
    c.v.assign(FakeCoordinator::kTotal, 0.001f);
    Require(service.RestoreFrom(std::move(c)).ok(), "the seed checkpoint");
  }

  const State before = Capture(service);
  const void* body = data + 1;
  const int body_size = static_cast<int>(size - 1);
  loco::Status status;
  uint64_t pushed_step = 0;
  switch (kind) {
    case 0: {
      loco::v1::PushRequest req;
      if (!req.ParseFromArray(body, body_size)) return 0;
      pushed_step = req.step();
      loco::v1::PushResponse resp;
      status = service.DoPush(&req, &resp);
      if (status.ok() && resp.duplicate()) Require(Capture(service) == before, "a duplicate changed state");
      break;
    }
    case 1: {
      loco::v1::InitShardRequest req;
      if (!req.ParseFromArray(body, body_size)) return 0;
      loco::v1::InitShardResponse resp;
      status = service.DoInitShard(req, &resp);
      if (status.ok()) Require(!before.initialized, "a second init was accepted");
      break;
    }
    case 2: {
      loco::v1::PullRequest req;
      if (!req.ParseFromArray(body, body_size)) return 0;
      req.set_wait_ms(0);
      loco::v1::PullResponse resp;
      status = service.DoPull(req, &resp);
      Require(Capture(service) == before, "a pull changed state");
      break;
    }
    default: {
      loco::v1::ShardStatusRequest req;
      if (!req.ParseFromArray(body, body_size)) return 0;
      loco::v1::ShardStatusResponse resp;
      status = service.DoShardStatus(req, &resp);
      Require(Capture(service) == before, "a status call changed state");
      break;
    }
  }
  const State after = Capture(service);
  if (!status.ok()) {
    Require(!status.message().empty(), "a refusal without a message");
    Require(after == before, "a refused request changed state");
  }
  Require(after.pending <= 2, "more pushes held than the step has participants");
  if (start == 2 && kind == 0 && after.version > before.version + 1) {
    Require(after.version <= pushed_step + 1, "fast-forward past the pushed step");
    Require(after.version <= FakeCoordinator::kNewestKnownStep + 2,
            "fast-forward past the step the coordinator allows");
  } else {
    Require(after.version <= before.version + 1, "more than one step from one request");
  }
  return 0;
}

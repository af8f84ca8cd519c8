// loco-bench-e2e-transport: payload throughput of a LoCo-4 Push through real
// gRPC to a running loco-server, for the end-to-end benchmark
// (bench/e2e/run.sh --transport), which runs it across a shaped link.
//
// How it isolates the transport: it joins the coordinator as two workers, A
// and B, initialises the shard, and pushes A's step-0 payload once (held by
// the server: the step waits for B, who never pushes). Every further push of
// the same payload is a duplicate, which the server accepts without touching
// its state (proto/loco.proto: "A duplicate of an accepted push returns OK
// with duplicate = true and changes nothing"), so each timed RPC is the full
// payload crossing the link plus a tiny reply, with no decode or optimizer
// work behind it. The coordinator must be started with a heartbeat timeout
// longer than the run, or A and B expire (they do not heartbeat).
//
// Several workers' links at once (--probes W, one process per worker
// namespace): each probe joins its own A and B and waits until the cluster
// holds all 2W workers, so their timed pushes overlap (see Run); with --all-shards a
// probe pushes every shard of the model at once, one stream per shard, as a
// worker's step does, and a round's time is its slowest shard's.
//
// Output: one JSON line on stdout:
//   {"event":"transport","elements":n,"shards":s,"probes":w,"request_bytes":b,
//    "payload_bytes":p,"chunk_bytes":c,"pushes":k,"median_s":m,"min_s":x,
//    "total_s":t,"bytes_per_s":r}
// where n, b and p sum over the shards pushed, a round is one push of each,
// and bytes_per_s = request_bytes / median_s (this probe's link). Exit status 0, 2 for bad
// flags, 1 for any RPC failure (message on stderr).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/flags.h"
#include "common/lock_order_checks.h"
#include "kernels/quantize.h"
#include "proto/loco.grpc.pb.h"
#include "client/push_chunks.h"

namespace {

namespace pb = loco::v1;
using Clock = std::chrono::steady_clock;

struct Config {
  std::string coordinator;
  int64_t elements = 0, pushes = 0, bits = 4, block_size = 256, timeout_ms = 0, seed = 1;
  int64_t chunk_bytes = 0, probes = 1;
  bool all_shards = false;
};

std::shared_ptr<grpc::Channel> Dial(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// gRPC deadlines take the system clock.
void Deadline(grpc::ClientContext* ctx, int64_t ms) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

int RpcFail(const std::string& what, const grpc::Status& s) {
  std::cerr << "loco-bench-e2e-transport: " << what << ": " << s.error_message() << " (code "
            << static_cast<int>(s.error_code()) << ")\n";
  return 1;
}

int JoinAs(pb::Coordinator::Stub* coord, const Config& c, const char* name,
           pb::JoinResponse* out) {
  pb::JoinRequest req;
  req.set_name(name);
  req.set_total_elements(static_cast<uint64_t>(c.elements));
  grpc::ClientContext ctx;
  Deadline(&ctx, c.timeout_ms);
  // The probes start beside the coordinator: wait for it to listen.
  ctx.set_wait_for_ready(true);
  if (auto s = coord->Join(&ctx, req, out); !s.ok()) return RpcFail("joining", s);
  return 0;
}

// Waits until every server registered and the cluster holds at least
// `workers` workers. Bounded by the timeout.
int WaitForCluster(pb::Coordinator::Stub* coord, const Config& c, int64_t workers,
                   pb::ClusterView* view) {
  const auto until = Clock::now() + std::chrono::milliseconds(c.timeout_ms);
  while (true) {
    grpc::ClientContext ctx;
    Deadline(&ctx, c.timeout_ms);
    if (auto s = coord->GetClusterView(&ctx, pb::GetClusterViewRequest(), view); !s.ok()) {
      return RpcFail("reading the cluster view", s);
    }
    if (view->ready() && view->shard_map().shards_size() > 0 &&
        view->worker_ids_size() >= workers) {
      return 0;
    }
    if (Clock::now() > until) {
      std::cerr << "loco-bench-e2e-transport: the cluster was not ready with " << workers
                << " workers within " << c.timeout_ms << " ms (it has "
                << view->worker_ids_size() << ")\n";
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// One shard as the probe pushes it: its channel and the LoCo-4 push of A's
// step 0 over the shard's range.
struct ShardTarget {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::ParameterServer::Stub> stub;  // over `channel`
  pb::PushRequest push;
  size_t payload_bytes = 0;
};

int InitShard(const ShardTarget& t, const pb::ShardInfo& shard, uint64_t worker_id,
              const Config& c) {
  pb::InitShardRequest init;
  init.set_worker_id(worker_id);
  init.set_shard_id(shard.shard_id());
  pb::Payload* p = init.mutable_params();
  p->set_codec(pb::CODEC_FP32);
  p->set_offset(shard.offset());
  p->set_length(shard.length());
  p->mutable_data()->assign(shard.length() * sizeof(float), '\0');
  grpc::ClientContext ctx;
  Deadline(&ctx, c.timeout_ms);
  pb::InitShardResponse r;
  auto s = t.stub->InitShard(&ctx, init, &r);
  if (!s.ok() && s.error_code() != grpc::StatusCode::ALREADY_EXISTS) {
    return RpcFail("initialising shard " + std::to_string(shard.shard_id()), s);
  }
  return 0;
}

// A realistic payload: Gaussian "gradients" quantized by the real kernel.
// The worker id is set once A has joined.
int BuildPush(const pb::ShardInfo& shard, const Config& c, int64_t seed, ShardTarget* t) {
  const size_t n = static_cast<size_t>(shard.length());
  std::vector<float> g(n);
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  for (float& x : g) x = normal(rng);
  const int bits = static_cast<int>(c.bits), block = static_cast<int>(c.block_size);
  std::vector<uint8_t> codes(loco::PackedBytes(n, bits));
  std::vector<float> scales((n + static_cast<size_t>(block) - 1) / static_cast<size_t>(block));
  loco::QuantizeParams qp;
  qp.bits = bits;
  qp.block_size = block;
  if (auto s = loco::cpu::Quantize(g.data(), n, qp, codes.data(), scales.data(), nullptr);
      !s.ok()) {
    std::cerr << "loco-bench-e2e-transport: quantizing: " << s.ToString() << "\n";
    return 1;
  }
  t->push.set_shard_id(shard.shard_id());
  t->push.set_step(0);
  pb::Payload* q = t->push.mutable_gradient();
  q->set_codec(pb::CODEC_BLOCK_QUANT);
  q->set_bits(static_cast<uint32_t>(bits));
  q->set_block_size(static_cast<uint32_t>(block));
  q->set_offset(shard.offset());
  q->set_length(n);
  q->set_scales(reinterpret_cast<const char*>(scales.data()), scales.size() * sizeof(float));
  q->set_data(reinterpret_cast<const char*>(codes.data()), codes.size());
  t->payload_bytes = codes.size() + scales.size() * sizeof(float);
  return 0;
}

// One push of `t` (as the workers send it: in chunks, or unary when
// chunk_bytes is 0); the first of a run is the accepted one, every later
// one must come back a duplicate.
grpc::Status PushOnce(const ShardTarget& t, const Config& c, bool must_be_duplicate) {
  grpc::ClientContext ctx;
  Deadline(&ctx, c.timeout_ms);
  pb::PushResponse r;
  grpc::Status s =
      c.chunk_bytes > 0
          ? loco::SendPushInChunks(t.channel, &ctx, t.push, static_cast<size_t>(c.chunk_bytes), &r)
          : t.stub->Push(&ctx, t.push, &r);
  if (s.ok() && must_be_duplicate && !r.duplicate()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "a push was applied, not a duplicate: another worker is pushing to "
                        "this cluster");
  }
  return s;
}

// Round i pushes every shard at once, one thread per shard, as a worker's
// step does; its time is the slowest shard's. Round 0 (the accepted pushes)
// is untimed.
int TimedRounds(const std::vector<ShardTarget>& targets, const Config& c,
                std::vector<double>* secs) {
  for (int64_t i = 0; i <= c.pushes; ++i) {
    std::vector<grpc::Status> status(targets.size());
    const auto s0 = Clock::now();
    if (targets.size() == 1) {  // no thread to start inside the timed round
      status[0] = PushOnce(targets[0], c, i > 0);
    } else {
      std::vector<std::thread> threads;
      for (size_t k = 0; k < targets.size(); ++k) {
        threads.emplace_back([&, k] { status[k] = PushOnce(targets[k], c, i > 0); });
      }
      for (std::thread& t : threads) t.join();
    }
    const double dt = std::chrono::duration<double>(Clock::now() - s0).count();
    for (size_t k = 0; k < targets.size(); ++k) {
      if (!status[k].ok()) {
        return RpcFail("push " + std::to_string(i) + " to shard " + std::to_string(k),
                       status[k]);
      }
    }
    if (i > 0) secs->push_back(dt);
  }
  return 0;
}

// A start line shared by --probes processes: each joins B, builds its
// payloads (seconds of CPU for large ones), and only then joins A, so
// that once the cluster holds 2W workers every probe is ready to push and
// their timed pushes overlap.
int Run(const Config& c) {
  auto coord = pb::Coordinator::NewStub(Dial(c.coordinator));
  pb::JoinResponse a, b;
  if (int rc = JoinAs(coord.get(), c, "transport-b", &b)) return rc;
  pb::ClusterView view;
  if (int rc = WaitForCluster(coord.get(), c, 1, &view)) return rc;
  const int shards = c.all_shards ? view.shard_map().shards_size() : 1;
  std::vector<ShardTarget> targets(static_cast<size_t>(shards));
  for (int k = 0; k < shards; ++k) {
    const pb::ShardInfo& shard = view.shard_map().shards(k);
    ShardTarget& t = targets[static_cast<size_t>(k)];
    t.channel = Dial(shard.address());
    t.stub = pb::ParameterServer::NewStub(t.channel);
    if (int rc = BuildPush(shard, c, c.seed + k, &t)) return rc;
  }
  if (int rc = JoinAs(coord.get(), c, "transport-a", &a)) return rc;
  for (int k = 0; k < shards; ++k) {
    ShardTarget& t = targets[static_cast<size_t>(k)];
    t.push.set_worker_id(a.worker_id());
    if (int rc = InitShard(t, view.shard_map().shards(k), a.worker_id(), c)) return rc;
  }
  if (int rc = WaitForCluster(coord.get(), c, 2 * c.probes, &view)) return rc;
  std::vector<double> secs;
  const auto t0 = Clock::now();
  if (int rc = TimedRounds(targets, c, &secs)) return rc;
  const double total = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const pb::JoinResponse* w : {&a, &b}) {
    grpc::ClientContext ctx;
    Deadline(&ctx, c.timeout_ms);
    pb::LeaveRequest req;
    req.set_worker_id(w->worker_id());
    pb::LeaveResponse r;
    (void)coord->Leave(&ctx, req, &r);  // best effort: the run is measured already
  }
  std::vector<double> sorted = secs;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  size_t request_bytes = 0, payload_bytes = 0, elements = 0;
  for (const ShardTarget& t : targets) {
    request_bytes += t.push.ByteSizeLong();
    payload_bytes += t.payload_bytes;
    elements += t.push.gradient().length();
  }
  std::printf(
      "{\"event\":\"transport\",\"elements\":%zu,\"shards\":%d,\"probes\":%lld,"
      "\"request_bytes\":%zu,\"payload_bytes\":%zu,"
      "\"chunk_bytes\":%lld,\"pushes\":%lld,\"median_s\":%.6g,\"min_s\":%.6g,\"total_s\":%.6g,"
      "\"bytes_per_s\":%.6g}\n",
      elements, shards, static_cast<long long>(c.probes), request_bytes, payload_bytes,
      static_cast<long long>(c.chunk_bytes), static_cast<long long>(c.pushes), median,
      sorted.front(), total, static_cast<double>(request_bytes) / median);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  loco::DisableLockOrderChecks();  // as the service binaries do
  Config c;
  loco::FlagSet f("loco-bench-e2e-transport");
  f.AddString("coordinator", "LOCO_COORDINATOR", "127.0.0.1:7000",
              "host:port of the coordinator", &c.coordinator);
  f.AddInt("elements", "LOCO_E2E_ELEMENTS", 12 << 20, 4096, int64_t{1} << 32,
           "model size in parameters; the payload covers shard 0 of it", &c.elements);
  f.AddInt("pushes", "LOCO_E2E_PUSHES", 10, 1, 100000, "timed pushes (after one untimed)",
           &c.pushes);
  f.AddInt("bits", "LOCO_BITS", 4, 2, 8, "code width (2, 4 or 8)", &c.bits);
  f.AddInt("block-size", "LOCO_BLOCK_SIZE", 256, 32, 4096,
           "elements per scale (multiple of 32)", &c.block_size);
  f.AddInt("timeout-ms", "LOCO_E2E_TIMEOUT_MS", 60000, 1, 3600000,
           "deadline of each RPC and of the wait for the cluster", &c.timeout_ms);
  f.AddInt("seed", "LOCO_SEED", 1, 0, INT64_MAX, "seed of the synthetic gradient", &c.seed);
  f.AddInt("push-chunk-bytes", "LOCO_PUSH_CHUNK_BYTES", 256 << 10, 0, int64_t{64} << 20,
           "data bytes per PushStream chunk, as loco-worker sends them (0 = one unary Push)",
           &c.chunk_bytes);
  f.AddInt("probes", "LOCO_E2E_PROBES", 1, 1, 250,
           "probe processes pushing together (each joins two workers); each waits until "
           "the cluster holds all of them before its timed pushes",
           &c.probes);
  f.AddBool("all-shards", "LOCO_E2E_ALL_SHARDS", false,
            "push every shard of the model at once, one stream each, as a worker's step "
            "does (otherwise shard 0 alone)",
            &c.all_shards);
  if (auto code = f.ParseCommandLine(argc, argv, std::cout, std::cerr)) return *code;
  if (c.bits != 2 && c.bits != 4 && c.bits != 8) {
    std::cerr << "loco-bench-e2e-transport: invalid value '" << c.bits
              << "' for --bits: expected 2, 4 or 8\n";
    return 2;
  }
  if (c.block_size % 32 != 0) {
    std::cerr << "loco-bench-e2e-transport: invalid value '" << c.block_size
              << "' for --block-size: expected a multiple of 32 in [32, 4096]\n";
    return 2;
  }
  return Run(c);
}

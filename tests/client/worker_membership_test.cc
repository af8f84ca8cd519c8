// loco::Worker joining and leaving real in-process servers on loopback
// (tests/client/worker_cluster.h): failed joins, joiners excluded from an
// open step, validation of Connect and Join, waiting for a cluster step.
#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/worker.h"
#include "kernels/device.h"
#include "kernels/loco_compress.h"
#include "kernels/quantize.h"
#include "server/coordinator/coordinator_server.h"
#include "server/parameter_server.h"
#include "tests/client/worker_cluster.h"
#include "tests/common/random_batch.h"
#include "tests/common/says.h"

namespace loco {
namespace {

using namespace cluster_fixture;  // NOLINT: the fixture of every test here

// Gradients on a CUDA device need a device (and a CUDA build): without one,
// Join fails saying so and leaves, so the cluster does not wait for it.
TEST(WorkerClusterTest, DeviceGradientsWithoutADeviceFailJoinAndLeave) {
  if (cuda::DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  Cluster cluster;
  WorkerOptions o = cluster.Options(PushCodec::kLoco);
  o.gradient_device = 0;
  auto w = Worker::Connect(o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const Status joined = (*w)->Join(kElements);
  EXPECT_FALSE(joined.ok());
  EXPECT_TRUE(joined.code() == StatusCode::kUnavailable ||
              joined.code() == StatusCode::kUnimplemented)
      << joined.ToString();
  EXPECT_NE(joined.message().find("CUDA"), std::string::npos) << joined.ToString();
  std::unique_ptr<Worker> host = JoinedWorker(cluster.Options(PushCodec::kLoco));
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->world_size(), 1u);
  o.gradient_device = -2;
  EXPECT_FALSE(Worker::Connect(o).ok());
}

// The options of the one server (shard 0 of 1, plaintext on loopback) of
// the coordinator at `coordinator`.
ParameterServerOptions OnlyServerOptions(const std::string& coordinator) {
  ParameterServerOptions po;
  po.security = TransportSecurityOptions::Insecure();
  po.coordinator = coordinator;
  po.num_servers = 1;
  po.shard.shard_id = 0;
  po.shard.return_path.codec = PullCodec::kFp32;
  return po;
}

// A join whose cluster never became ready (no server yet) leaves the
// cluster again, and the same Worker joins once the server is up: the
// coordinator then counts one worker, not a stale one beside it.
TEST(WorkerClusterTest, FailedJoinLeavesAndTheSameWorkerJoinsAgain) {
  CoordinatorServerOptions co;
  co.security = TransportSecurityOptions::Insecure();  // loopback
  co.coordinator.membership.num_shards = 1;
  co.coordinator.membership.shard_align = kAlign;
  co.coordinator.membership.heartbeat_timeout = std::chrono::milliseconds(20000);
  CoordinatorServer coordinator(co);
  ASSERT_TRUE(coordinator.Start().ok());

  WorkerOptions o;
  o.security = TransportSecurityOptions::Insecure();
  o.coordinator = coordinator.address();
  o.codec = PushCodec::kFp32;
  o.block_size = kAlign;
  o.rpc_timeout_ms = 5000;
  o.join_timeout_ms = 300;  // the view cannot be ready: no server registered
  o.max_retries = 1;
  auto w = Worker::Connect(o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const Status first = (*w)->Join(kElements);
  ASSERT_EQ(first.code(), StatusCode::kDeadlineExceeded) << first.ToString();
  EXPECT_EQ((*w)->worker_id(), 0u);

  ParameterServer server(OnlyServerOptions(coordinator.address()));
  ASSERT_TRUE(server.Start().ok());
  // The same Worker, with the time to see the server register.
  Status again = Status::Ok();
  for (int attempt = 0; attempt < 20; ++attempt) {
    again = (*w)->Join(kElements);
    if (again.code() != StatusCode::kDeadlineExceeded) break;
  }
  ASSERT_TRUE(again.ok()) << again.ToString();
  EXPECT_NE((*w)->worker_id(), 0u);
  EXPECT_EQ((*w)->world_size(), 1u) << "the failed join is still a member";
  std::vector<float> params;
  ASSERT_TRUE((*w)->InitParameters(Uniform(kElements, 4, -1, 1), &params).ok());
  ASSERT_TRUE((*w)->Step(Uniform(kElements, 5, -1, 1), &params).ok());
  EXPECT_EQ(server.service().Snapshot().version(), 1u);
  EXPECT_TRUE((*w)->Leave().ok());
  server.Shutdown(std::chrono::milliseconds(500));
  coordinator.Shutdown(std::chrono::milliseconds(500));
}


// A worker that joins while a step is open is not its participant: its push
// is refused (not a participant, or already applied when the step completed
// first), it drops the gradient, waits for the step to complete and takes
// part from the next one. With `give_joiner_a_head_start` the joiner's push
// most likely reaches the open step first (the "not a participant" path);
// either order must end the same way.
class JoinerTest : public ::testing::TestWithParam<bool> {};

TEST_P(JoinerTest, JoinerExcludedFromOpenStepResynchronises) {
  Cluster cluster;
  std::unique_ptr<Worker> w1 = JoinedWorker(cluster.Options(PushCodec::kFp32));
  std::unique_ptr<Worker> w2 = JoinedWorker(cluster.Options(PushCodec::kFp32));
  ASSERT_NE(w1, nullptr);
  ASSERT_NE(w2, nullptr);
  const std::vector<float> init = Uniform(kElements, 8, -1, 1);
  std::vector<float> p1, p2, p3;
  ASSERT_TRUE(w1->InitParameters(init, &p1).ok());
  ASSERT_TRUE(w2->InitParameters(init, &p2).ok());
  const std::vector<float> g = Uniform(kElements, 9, -1, 1);

  StatusOr<StepResult> r1 = Status(StatusCode::kInternal, "not run");
  std::thread t1([&] { r1 = w1->Step(g, &p1); });
  // Step 0 opens with participants {w1, w2} once w1's push arrived (bounded wait).
  for (int i = 0; i < 100 && cluster.server(0).service().pending_pushes() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(cluster.server(0).service().pending_pushes(), 1u);

  std::unique_ptr<Worker> w3 = JoinedWorker(cluster.Options(PushCodec::kFp32));
  ASSERT_NE(w3, nullptr);
  ASSERT_TRUE(w3->InitParameters(init, &p3).ok());
  EXPECT_EQ(w3->step(), 0u);
  StatusOr<StepResult> r3 = Status(StatusCode::kInternal, "not run");
  std::thread t3([&] { r3 = w3->Step(g, &p3); });
  if (GetParam()) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto r2 = w2->Step(g, &p2);
  t1.join();
  t3.join();
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  ASSERT_TRUE(r3.ok()) << r3.status().ToString();
  EXPECT_FALSE(r1->resynced);
  EXPECT_FALSE(r2->resynced);
  EXPECT_TRUE(r3->resynced);
  EXPECT_EQ(r3->push_wire_bytes, 0u);  // the refused push is not counted
  EXPECT_EQ(w3->traffic().resyncs, 1u);
  EXPECT_EQ(w1->step(), 1u);
  EXPECT_EQ(w3->step(), 1u);
  EXPECT_EQ(p3, p1);
  EXPECT_EQ(p2, p1);

  // Step 1 includes all three.
  std::vector<std::thread> threads;
  std::vector<Status> st(3);
  Worker* ws[3] = {w1.get(), w2.get(), w3.get()};
  std::vector<float>* ps[3] = {&p1, &p2, &p3};
  for (int k = 0; k < 3; ++k) {
    threads.emplace_back([&, k] {
      auto r = ws[k]->Step(g, ps[k]);
      st[k] = r.ok() ? (r->resynced ? Status(StatusCode::kAborted, "resynced") : Status::Ok())
                     : r.status();
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(st[k].ok()) << k << ": " << st[k].ToString();
  EXPECT_EQ(w3->step(), 2u);
  EXPECT_EQ(p3, p1);
}

INSTANTIATE_TEST_SUITE_P(WorkerClusterTest, JoinerTest, ::testing::Bool());

TEST(WorkerClusterTest, ConnectAndJoinValidateInput) {
  WorkerOptions o;
  o.security = TransportSecurityOptions::Insecure();  // so that each refusal below is for its own field
  o.coordinator = "nowhere";
  EXPECT_EQ(Worker::Connect(o).status().code(), StatusCode::kInvalidArgument);
  o.coordinator = "127.0.0.1:1";
  const StatusOr<PushCodec> int3 = ParsePushCodec("int3");
  EXPECT_EQ(int3.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(int3.status().message().find("fp32|bf16|naive|ef|loco"), std::string::npos)
      << int3.status().ToString();
  o.codec = static_cast<PushCodec>(99);  // outside the enum, as a bad cast would make it
  EXPECT_EQ(Worker::Connect(o).status().code(), StatusCode::kInvalidArgument);
  o.codec = PushCodec::kLoco;
  o.block_size = 100;
  EXPECT_EQ(Worker::Connect(o).status().code(), StatusCode::kInvalidArgument);
  o.block_size = 128;
  for (const size_t chunk : {size_t{1}, size_t{4095}, (size_t{64} << 20) + 1}) {
    o.push_chunk_bytes = chunk;
    const Status refused = Worker::Connect(o).status();
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << chunk;
    EXPECT_NE(refused.message().find("push_chunk_bytes"), std::string::npos) << refused.ToString();
  }
  o.push_chunk_bytes = 0;
  EXPECT_TRUE(ValidateWorkerOptions(o).ok());
  // InitShard carries a full fp32 shard: it is bounded like a step, not
  // like a small RPC (a 73.6M model's 147 MB shards missed 10 s on shaped
  // 1 Gbit/s links), and never below one RPC's deadline.
  o.rpc_timeout_ms = 10000;
  o.step_timeout_ms = 300000;
  EXPECT_EQ(InitShardTimeout(o), std::chrono::milliseconds(300000));
  o.step_timeout_ms = 2000;
  EXPECT_EQ(InitShardTimeout(o), std::chrono::milliseconds(10000));
  o.block_size = 100;

  Cluster cluster;
  WorkerOptions bad_block = cluster.Options(PushCodec::kLoco);
  bad_block.block_size = 256;  // does not divide the shard alignment of 128
  auto first = JoinedWorker(cluster.Options(PushCodec::kFp32));
  ASSERT_NE(first, nullptr);
  auto w = Worker::Connect(bad_block);
  ASSERT_TRUE(w.ok());
  Status s = (*w)->Join(kElements);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  auto other_size = Worker::Connect(cluster.Options(PushCodec::kFp32));
  ASSERT_TRUE(other_size.ok());
  EXPECT_FALSE((*other_size)->Join(kElements + 1).ok());
  std::vector<float> params;
  auto r = (*other_size)->Step(std::vector<float>(kElements), &params);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
}

// WaitForClusterStep (loco-worker --join-at-step) reads the cluster's step
// from outside the membership: it times out while no one trains, returns
// once the step is reached, and never joins.
TEST(WorkerClusterTest, WaitForClusterStepWaitsForTheStepWithoutJoining) {
  Cluster cluster;
  auto watcher = Worker::Connect(cluster.Options(PushCodec::kLoco));
  ASSERT_TRUE(watcher.ok()) << watcher.status().ToString();
  auto soon = [](int ms) {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  };
  // No worker has fixed the model size yet: the view is not ready.
  auto early = (*watcher)->WaitForClusterStep(1, soon(200));
  EXPECT_EQ(early.status().code(), StatusCode::kDeadlineExceeded) << early.status().ToString();

  std::unique_ptr<Worker> w = JoinedWorker(cluster.Options(PushCodec::kFp32));
  ASSERT_NE(w, nullptr);
  std::vector<float> params;
  ASSERT_TRUE(w->InitParameters(Uniform(kElements, 1, -1, 1), &params).ok());
  constexpr uint64_t kWaitFor = 5, kSteps = 8;
  StatusOr<uint64_t> seen = DeadlineExceeded("not run");
  std::thread waiting([&] { seen = (*watcher)->WaitForClusterStep(kWaitFor, soon(20000)); });
  const std::vector<float> g = Uniform(kElements, 2, -1, 1);
  for (uint64_t t = 0; t < kSteps; ++t) {
    auto r = w->Step(g, &params);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  waiting.join();
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_GE(*seen, kWaitFor);
  EXPECT_LE(*seen, kSteps);
  // Training is at kSteps now: a later step is not reached, and the message
  // says where the cluster is.
  auto later = (*watcher)->WaitForClusterStep(kSteps + 1, soon(200));
  EXPECT_EQ(later.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(later.status().message().find("last seen: step " + std::to_string(kSteps)),
            std::string::npos)
      << later.status().ToString();
  EXPECT_EQ((*watcher)->worker_id(), 0u) << "waiting must not join";
  EXPECT_EQ(w->world_size(), 1u);
}

// A worker of `cluster` with `step_timeout_ms`, past one step (into
// *params), whose shard 1's server is then shut down for good. Null when
// a call fails.
std::unique_ptr<Worker> WorkerWhoseSecondServerIsGone(Cluster& cluster, int step_timeout_ms,
                                                      std::vector<float>* params) {
  WorkerOptions o = cluster.Options(PushCodec::kFp32);
  o.step_timeout_ms = step_timeout_ms;
  auto w = JoinedWorker(o);
  if (w == nullptr || !w->InitParameters(std::vector<float>(kElements, 0.5f), params).ok() ||
      !w->Step(std::vector<float>(kElements, 0.1f), params).ok()) {
    return nullptr;
  }
  cluster.server(1).Shutdown(std::chrono::milliseconds(500));
  return w;
}

// A server gone for good: the step keeps trying while it may be restarting
// (its pushes and pulls retry until the step's deadline), then fails saying
// how long it waited and which setting bounds that.
TEST(WorkerClusterTest, AServerGoneForGoodFailsTheStepAtStepTimeoutNamingIt) {
  Cluster cluster;
  std::vector<float> params;
  auto w = WorkerWhoseSecondServerIsGone(cluster, 1500, &params);
  ASSERT_NE(w, nullptr);

  const auto started = std::chrono::steady_clock::now();
  auto r = w->Step(std::vector<float>(kElements, 0.1f), &params);
  const double waited_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("shard 1"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("step_timeout_ms = 1500"), std::string::npos)
      << r.status().ToString();
  EXPECT_GE(waited_s, 1.4);
  EXPECT_LT(waited_s, 15.0);
}

// The interrupt check ends a step whose server is away (which it would wait
// for until step_timeout_ms, a minute here) within about 100 ms of saying
// so: ABORTED, saying so.
TEST(WorkerClusterTest, InterruptCheckEndsAStepWaitingForAServerThatIsAway) {
  Cluster cluster;
  std::vector<float> params;
  auto w = WorkerWhoseSecondServerIsGone(cluster, 60000, &params);
  ASSERT_NE(w, nullptr);

  const auto started = std::chrono::steady_clock::now();
  std::atomic<int> checks{0};
  w->SetInterruptCheck([&] {
    ++checks;
    return std::chrono::steady_clock::now() - started > std::chrono::milliseconds(300);
  });
  auto r = w->Step(std::vector<float>(kElements, 0.1f), &params);
  const auto waited = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAborted) << r.status().ToString();
  EXPECT_NE(r.status().message().find("interrupted"), std::string::npos) << r.status().ToString();
  EXPECT_GE(checks.load(), 3);
  EXPECT_LT(waited, std::chrono::seconds(5));
}

// The interrupt check also ends a resynchronisation: a joiner whose push
// step 0 refused (it opened with w1 and w2 only) waits for that step to
// complete, which it would until step_timeout_ms (a minute here) since w2
// does not push; the check ends that wait within about 100 ms.
TEST(WorkerClusterTest, InterruptCheckEndsAResynchronisationWaitingForAStep) {
  Cluster cluster;
  std::unique_ptr<Worker> w1 = JoinedWorker(cluster.Options(PushCodec::kFp32));
  std::unique_ptr<Worker> w2 = JoinedWorker(cluster.Options(PushCodec::kFp32));
  ASSERT_NE(w1, nullptr);
  ASSERT_NE(w2, nullptr);
  const std::vector<float> init = Uniform(kElements, 8, -1, 1);
  std::vector<float> p1, p2, p3;
  ASSERT_TRUE(w1->InitParameters(init, &p1).ok());
  ASSERT_TRUE(w2->InitParameters(init, &p2).ok());
  const std::vector<float> g = Uniform(kElements, 9, -1, 1);
  StatusOr<StepResult> r1 = Status(StatusCode::kInternal, "not run");
  std::thread t1([&] { r1 = w1->Step(g, &p1); });
  for (int i = 0; i < 100 && cluster.server(0).service().pending_pushes() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(cluster.server(0).service().pending_pushes(), 1u);

  WorkerOptions o3 = cluster.Options(PushCodec::kFp32);
  o3.step_timeout_ms = 60000;
  std::unique_ptr<Worker> w3 = JoinedWorker(o3);
  ASSERT_NE(w3, nullptr);
  ASSERT_TRUE(w3->InitParameters(init, &p3).ok());
  const auto started = std::chrono::steady_clock::now();
  w3->SetInterruptCheck(
      [&] { return std::chrono::steady_clock::now() - started > std::chrono::milliseconds(300); });
  const StatusOr<StepResult> r3 = w3->Step(g, &p3);
  const auto waited = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.status().code(), StatusCode::kAborted) << r3.status().ToString();
  EXPECT_NE(r3.status().message().find("interrupted"), std::string::npos) << r3.status().ToString();
  EXPECT_EQ(w3->traffic().resyncs, 1u);  // it was the resynchronisation that ended
  EXPECT_LT(waited, std::chrono::seconds(5));

  // Step 0 completes with w2's push; w1 gets its answer.
  ASSERT_TRUE(w2->Step(g, &p2).ok());
  t1.join();
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(p1, p2);
}

// The interrupt check also ends an InitParameters waiting for a server that
// is away: a worker of rank 1 waits for rank 0's copy to reach every shard
// (it would until step_timeout_ms, a minute here), one of rank 0 retries
// its own offer (for retry_budget_ms, a minute here). Each ends within
// about 100 ms of the check saying so: ABORTED, saying so.
TEST(WorkerClusterTest, InterruptCheckEndsAnInitParametersWaitingForAServerThatIsAway) {
  Cluster cluster;
  std::vector<float> params;
  auto w1 = WorkerWhoseSecondServerIsGone(cluster, 60000, &params);
  ASSERT_NE(w1, nullptr);
  WorkerOptions o = cluster.Options(PushCodec::kFp32);
  o.step_timeout_ms = 60000;
  o.max_retries = 1000;
  o.retry_budget_ms = 60000;
  for (const uint32_t rank : {1u, 0u}) {
    if (rank == 0) {
      ASSERT_TRUE(w1->Leave().ok());  // so that the next joiner offers its own copy
    }
    std::unique_ptr<Worker> w = JoinedWorker(o);
    ASSERT_NE(w, nullptr);
    ASSERT_EQ(w->rank(), rank);
    const auto started = std::chrono::steady_clock::now();
    w->SetInterruptCheck([&] {
      return std::chrono::steady_clock::now() - started > std::chrono::milliseconds(300);
    });
    std::vector<float> p;
    const Status s = w->InitParameters(std::vector<float>(kElements, 0.25f), &p);
    const auto waited = std::chrono::steady_clock::now() - started;
    EXPECT_EQ(s.code(), StatusCode::kAborted) << "rank " << rank << ": " << s.ToString();
    EXPECT_NE(s.message().find("interrupted"), std::string::npos) << s.ToString();
    EXPECT_LT(waited, std::chrono::seconds(5)) << "rank " << rank;
    ASSERT_TRUE(w->Leave().ok());
  }
}

// Joins `w` while another thread calls InterruptJoin 300 ms in. Expects
// ABORTED with `message` in it, within 5 s.
void ExpectJoinInterrupted(Worker& w, const std::string& message) {
  std::thread interrupter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    w.InterruptJoin();
  });
  const auto started = std::chrono::steady_clock::now();
  const Status joined = w.Join(kElements);
  const auto took = std::chrono::steady_clock::now() - started;
  interrupter.join();
  EXPECT_EQ(joined.code(), StatusCode::kAborted) << joined.ToString();
  EXPECT_NE(joined.message().find(message), std::string::npos) << joined.ToString();
  EXPECT_LT(took, std::chrono::seconds(5));
}

// InterruptJoin ends a Join that retries an unreachable coordinator (it
// would for coordinator_outage_ms) within about 50 ms: ABORTED, saying so.
TEST(WorkerClusterTest, InterruptJoinEndsAJoinRetryingAnUnreachableCoordinator) {
  WorkerOptions o;
  o.security = TransportSecurityOptions::Insecure();
  o.coordinator = "127.0.0.1:1";  // refuses connections
  o.coordinator_outage_ms = 120000;
  auto w = Worker::Connect(o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ExpectJoinInterrupted(**w, "interrupted while retrying");
}

// InterruptJoin also ends a Join waiting for the cluster to be ready (no
// server has registered: it would wait join_timeout_ms, a minute here):
// ABORTED, saying so, and it left the cluster again.
TEST(WorkerClusterTest, InterruptJoinEndsAJoinWaitingForTheClusterToBeReady) {
  CoordinatorServerOptions co;
  co.security = TransportSecurityOptions::Insecure();  // loopback
  co.coordinator.membership.num_shards = 1;
  co.coordinator.membership.shard_align = kAlign;
  CoordinatorServer coordinator(co);
  ASSERT_TRUE(coordinator.Start().ok());
  WorkerOptions o;
  o.security = TransportSecurityOptions::Insecure();
  o.coordinator = coordinator.address();
  o.block_size = kAlign;
  o.join_timeout_ms = 60000;
  auto w = Worker::Connect(o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ExpectJoinInterrupted(**w, "interrupted while waiting for the cluster to be ready");

  // Once a server registers, the same Worker joins as the only member: the
  // interrupted join left.
  ParameterServer server(OnlyServerOptions(coordinator.address()));
  ASSERT_TRUE(server.Start().ok());
  ASSERT_TRUE((*w)->Join(kElements).ok());
  EXPECT_EQ((*w)->world_size(), 1u) << "the interrupted join is still a member";
  EXPECT_TRUE((*w)->Leave().ok());
  server.Shutdown(std::chrono::milliseconds(500));
  coordinator.Shutdown(std::chrono::milliseconds(500));
}

// LeaveNow (the Python package's exit handler) left the heartbeat beating:
// its next beat met the coordinator's NOT_FOUND and marked the worker
// expired, logging that it "must join again". A worker that left is not
// expired, however many heartbeat intervals (200 ms here) pass.
TEST(WorkerClusterTest, AWorkerThatLeftNowIsNotExpiredByItsHeartbeat) {
  Cluster cluster;
  std::unique_ptr<Worker> w = JoinedWorker(cluster.Options(PushCodec::kFp32));
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->LeaveNow().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_FALSE(w->expired());
}

// Once LeaveNow's Leave was answered, Leave (and the destructor) sent
// another: at exit, with the local cluster gone by then, it logged
// "leaving on destruction: UNAVAILABLE". Now they send none: Leave
// succeeds with the coordinator gone.
TEST(WorkerClusterTest, AWorkerThatLeftNowDoesNotLeaveAgain) {
  auto cluster = std::make_unique<Cluster>();
  std::unique_ptr<Worker> w = JoinedWorker(cluster->Options(PushCodec::kFp32));
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->LeaveNow().ok());
  cluster.reset();
  const Status left = w->Leave();
  EXPECT_TRUE(left.ok()) << left.ToString();
}

// The interrupt check ends WaitForClusterStep between its polls (Ctrl-C
// in the Python package): ABORTED, saying so, where the wait would last
// its minute.
TEST(WorkerClusterTest, InterruptCheckEndsAWaitForAClusterStep) {
  Cluster cluster;
  auto w = Worker::Connect(cluster.Options(PushCodec::kFp32));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::atomic<int> asked{0};
  (*w)->SetInterruptCheck([&asked] { return ++asked >= 3; });
  const StatusOr<uint64_t> seen =
      (*w)->WaitForClusterStep(100, std::chrono::steady_clock::now() + std::chrono::seconds(60));
  ASSERT_FALSE(seen.ok());
  EXPECT_EQ(seen.status().code(), StatusCode::kAborted) << seen.status().ToString();
  EXPECT_TRUE(Says(seen.status().message(), {"reach step 100 was interrupted"}));
  EXPECT_EQ(asked.load(), 3);
}

}  // namespace
}  // namespace loco

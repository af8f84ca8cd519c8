// A worker stalled past the heartbeat timeout whose step then fails on its
// own deadline, before its heartbeat thread has run again (a SIGSTOP'd
// process continued mid-step): the failed Step asks the coordinator, finds
// the worker expired, and says so, so that the caller rejoins instead of
// taking the deadline for a fatal error. Against real in-process servers;
// made deterministic by a heartbeat interval far longer than the test, and
// by removing the worker from the coordinator (what its expiry does) from
// the test while the step waits.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "client/worker.h"
#include "proto/loco.grpc.pb.h"
#include "tests/client/worker_cluster.h"
#include "tests/common/random_batch.h"

namespace loco {
namespace {

using namespace cluster_fixture;  // NOLINT: the fixture of every test here
using std::chrono::milliseconds;

// What the coordinator does to a worker stalled past the heartbeat timeout,
// done at once: removes `worker_id` from the membership.
void RemoveWorker(const std::string& coordinator, uint64_t worker_id) {
  auto stub = v1::Coordinator::NewStub(
      grpc::CreateChannel(coordinator, grpc::InsecureChannelCredentials()));
  v1::LeaveRequest req;
  req.set_worker_id(worker_id);
  v1::LeaveResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(5000));
  const grpc::Status s = stub->Leave(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
}

TEST(WorkerStallTest, AStepFailingAfterAStallFindsTheExpiryAndTheWorkerRejoins) {
  // Workers beat every 60 s: never, within this test.
  Cluster cluster(/*shards=*/1, /*heartbeat_timeout=*/milliseconds(120000),
                  /*heartbeat_interval=*/milliseconds(60000));
  WorkerOptions options = cluster.Options(PushCodec::kFp32);
  std::unique_ptr<Worker> alive = JoinedWorker(options);
  options.step_timeout_ms = 3000;  // the stalled worker's step gives up after 3 s
  options.pull_wait_ms = 1000;
  std::unique_ptr<Worker> stalled = JoinedWorker(options);
  ASSERT_NE(alive, nullptr);
  ASSERT_NE(stalled, nullptr);
  const std::vector<float> init = Uniform(kElements, 5, -1, 1);
  std::vector<float> pa, pb;
  ASSERT_TRUE(alive->InitParameters(init, &pa).ok());
  ASSERT_TRUE(stalled->InitParameters(init, &pb).ok());
  const uint64_t old_id = stalled->worker_id();

  // The stalled worker pushes step 0 and waits for version 1, which needs
  // the other worker's push; meanwhile the coordinator removes it. Its
  // heartbeat thread will not run for a minute: only the step's own
  // failure can find out.
  const std::vector<float> g = Uniform(kElements, 6, -0.1f, 0.1f);
  std::thread remover([&] {
    std::this_thread::sleep_for(milliseconds(500));
    RemoveWorker(options.coordinator, old_id);
  });
  auto r = stalled->Step(g, &pb);
  remover.join();
  ASSERT_FALSE(r.ok()) << "the step completed without the other worker's push";
  EXPECT_TRUE(stalled->expired()) << r.status().ToString();
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("Rejoin"), std::string::npos) << r.status().ToString();

  // What the caller does next: rejoin under a new id with the cluster's copy.
  const Status rejoined = stalled->Rejoin(init, &pb);
  ASSERT_TRUE(rejoined.ok()) << rejoined.ToString();
  EXPECT_FALSE(stalled->expired());
  EXPECT_NE(stalled->worker_id(), old_id);
  EXPECT_EQ(pb, pa);
  EXPECT_TRUE(alive->Leave().ok());
  EXPECT_TRUE(stalled->Leave().ok());
}

}  // namespace
}  // namespace loco

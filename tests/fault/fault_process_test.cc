// The fault scenarios (DESIGN §3, §5) with real processes on loopback: the
// project's loco-coordinator, loco-server and loco-worker binaries, broken
// with real signals. Each test states what was lost. Every wait is bounded;
// timings are printed, never asserted.
//
// The end state of every scenario is checked the same way: all shards agree
// on the step, and every worker that finished holds exactly the servers'
// parameters (CRC-32 of the fp32 copies; the servers answer a full pull with
// the copy the workers follow).
#include <gtest/gtest.h>
#include <signal.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "server/checkpoint.h"
#include "tests/fault/process_checks.h"
#include "tests/fault/process_cluster.h"

namespace loco::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// kill -9 one of 4 workers mid-step: the step it held up completes with the
// others' payloads once its heartbeats time out, and training goes on.
// Lost: the killed worker's gradient for that one step; 0 steps.
TEST(FaultProcess, KillNineOneOfFourWorkersLosesNoStep) {
  ProcessClusterOptions o;
  o.name = "killworker";
  o.workers = 4;
  o.steps = 300;
  o.heartbeat_timeout_ms = 1500;
  o.heartbeat_interval_ms = 150;
  ProcessCluster c(o);
  ASSERT_TRUE(c.Start());
  ASSERT_TRUE(c.WaitFor([&] { return EveryWorkerReported(c) && c.MaxStep() >= 20; }, seconds(90)))
      << c.Logs();
  const uint64_t kill_step = c.MaxStep();
  c.worker(3).child->Signal(SIGKILL);
  const auto killed_at = Clock::now();
  auto survivors_step = [&] {
    uint64_t m = 0;
    for (int i = 0; i < 3; ++i) m = std::max(m, c.worker(i).step);
    return m;
  };
  // Bounded by the heartbeat timeout plus generous slack for busy machines.
  ASSERT_TRUE(c.WaitFor([&] { return survivors_step() >= kill_step + 3; },
                        milliseconds(o.heartbeat_timeout_ms) + seconds(30)))
      << "the survivors did not carry on\n" << c.Logs();
  const auto resumed_ms =
      std::chrono::duration_cast<milliseconds>(Clock::now() - killed_at).count();
  ASSERT_TRUE(c.WaitForWorkersToExit(seconds(90))) << c.Logs();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c.worker(i).child->exit_code(), 0) << c.Logs();
    EXPECT_TRUE(c.worker(i).done);
  }
  ExpectConsistent(c, o.steps);
  EXPECT_NE(ReadFile(c.coordinator().log_path()).find("missed its heartbeats; expired"),
            std::string::npos);
  std::printf("lost: worker-3's gradient for the step it held up (killed at step %llu); "
              "0 steps; the survivors were 3 steps further %lld ms after the kill "
              "(heartbeat timeout %lld ms)\n",
              (unsigned long long)kill_step, (long long)resumed_ms,
              (long long)o.heartbeat_timeout_ms);
}

// A worker that joins at step 50 of 200 gets a full copy equal to what the
// others hold at its first step. Lost: nothing.
//
// The joiner starts first and loads its data while nothing trains; it tells
// when it is ready ("waiting"), and only then the two initial workers start.
// So its join point is its --join-at-step, not the time its process needed.
// It polls every 10 ms and the step may move on while its join RPCs run,
// so its first step is within a few steps of 50: steps here take several
// milliseconds (hidden layer of 512), which keeps that bound loose.
TEST(FaultProcess, WorkerJoiningAtStep50HoldsTheServersParameters) {
  constexpr uint64_t kJoinAt = 50;
  constexpr uint64_t kSlack = 5;
  ProcessClusterOptions o;
  o.name = "join";
  o.workers = 0;  // started below, after the joiner is ready
  o.steps = 200;
  o.hidden = "512";
  o.pull_codec = "delta";  // the joiner must land on the replica the others follow
  ProcessCluster c(o);
  ASSERT_TRUE(c.Start());
  ASSERT_TRUE(c.StartWorker({"--join-at-step=" + std::to_string(kJoinAt)}));
  ASSERT_TRUE(c.WaitFor([&] { return c.worker(0).Find("waiting") != nullptr; }, seconds(60)))
      << c.Logs();
  EXPECT_EQ(c.worker(0).Find("joined"), nullptr) << "it joined before anyone trained";
  ASSERT_TRUE(c.StartWorker());
  ASSERT_TRUE(c.StartWorker());
  // Taken after the last StartWorker (which may move the workers).
  const WorkerProcess& joiner = c.worker(0);
  ASSERT_TRUE(c.WaitFor([&] { return joiner.Find("joined") != nullptr; }, seconds(90)))
      << c.Logs();
  ASSERT_TRUE(c.WaitForWorkersToExit(seconds(90))) << c.Logs();
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(c.worker(i).child->exit_code(), 0) << c.Logs();
  const FlatJson& joined = *joiner.Find("joined");
  const uint64_t first = static_cast<uint64_t>(JsonNumber(joined, "step", 0));
  EXPECT_GE(first, kJoinAt);
  EXPECT_LE(first, kJoinAt + kSlack) << "it joined too late\n" << c.Logs();
  // Its first step is computed at the joined copy...
  EXPECT_EQ(CrcAtStep(joiner, first), joined.at("params_crc"));
  // ...which is what the workers that were there all along held at that step.
  std::string others;
  for (size_t i = 1; i < 3 && others.empty(); ++i) others = CrcAtStep(c.worker(i), first);
  ASSERT_FALSE(others.empty()) << "no other worker reported step " << first;
  EXPECT_EQ(others, joined.at("params_crc"));
  ExpectConsistent(c, o.steps);
  std::printf("joined at step %llu (asked for %llu) with the servers' parameters; lost: nothing\n",
              (unsigned long long)first, (unsigned long long)kJoinAt);
}

// SIGSTOP a worker past the heartbeat timeout: it is removed and the others
// carry on; after SIGCONT it rejoins under a new id with a full copy.
// Lost: the stalled worker's gradient for the step it was in.
TEST(FaultProcess, StalledWorkerIsRemovedThenRejoinsCleanly) {
  ProcessClusterOptions o;
  o.name = "sigstop";
  o.workers = 3;
  o.steps = 600;
  o.heartbeat_timeout_ms = 1000;
  o.heartbeat_interval_ms = 100;
  ProcessCluster c(o);
  ASSERT_TRUE(c.Start());
  ASSERT_TRUE(c.WaitFor([&] { return EveryWorkerReported(c) && c.MaxStep() >= 20; }, seconds(90)))
      << c.Logs();
  const std::string old_id = c.worker(2).Find("joined")->at("worker");
  const uint64_t stop_step = c.MaxStep();
  c.worker(2).child->Signal(SIGSTOP);
  // The others can only get 5 steps further once the stalled one is expired.
  const bool carried_on = c.WaitFor(
      [&] { return std::max(c.worker(0).step, c.worker(1).step) >= stop_step + 5; }, seconds(30));
  c.worker(2).child->Signal(SIGCONT);
  ASSERT_TRUE(carried_on) << "the others waited for the stalled worker\n" << c.Logs();
  ASSERT_TRUE(c.WaitFor([&] { return c.worker(2).Find("joined", "rejoin", "true") != nullptr; },
                        seconds(60)))
      << c.Logs();
  ASSERT_TRUE(c.WaitForWorkersToExit(seconds(90))) << c.Logs();
  const FlatJson& rejoined = *c.worker(2).Find("joined", "rejoin", "true");
  EXPECT_NE(rejoined.at("worker"), old_id) << "a rejoining worker gets a new id";
  EXPECT_NE(c.worker(2).Find("expired", "worker", old_id), nullptr);
  const uint64_t at = static_cast<uint64_t>(JsonNumber(rejoined, "step", 0));
  if (at < o.steps) {
    std::string others;
    for (int i = 0; i < 2 && others.empty(); ++i) others = CrcAtStep(c.worker(i), at);
    ASSERT_FALSE(others.empty()) << "no other worker reported step " << at;
    EXPECT_EQ(others, rejoined.at("params_crc"));
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(c.worker(i).child->exit_code(), 0) << c.Logs();
  ExpectConsistent(c, o.steps);
  std::printf("worker %s stalled at step %llu, rejoined as worker %s at step %llu; lost: its "
              "gradient for the stalled step\n",
              old_id.c_str(), (unsigned long long)stop_step, rejoined.at("worker").c_str(),
              (unsigned long long)at);
}

struct ServerRun {
  double accuracy = -1;
  uint64_t restored = 0, fast_forwarded_to = 0;
  bool restarted = false;
};

// One worker (so that the two runs see the same data order), two shards,
// a checkpoint every 10 steps; optionally shard 1 is killed at step 150.
void RunWithOptionalServerKill(bool kill, ServerRun* out) {
  ProcessClusterOptions o;
  o.name = kill ? "killserver" : "undisturbed";
  o.workers = 1;
  o.steps = 400;
  o.pull_codec = "delta";
  o.checkpoints = true;
  o.checkpoint_every = 10;
  ProcessCluster c(o);
  ASSERT_TRUE(c.Start());
  if (kill) {
    ASSERT_TRUE(c.WaitFor([&] { return c.MaxStep() >= 155; }, seconds(90))) << c.Logs();
    c.server(1).Signal(SIGKILL);
    ASSERT_TRUE(c.WaitFor([&] { return c.server(1).Poll(); }, seconds(10)));
    std::string restored;
    ASSERT_TRUE(c.RestartServer(1, &restored));
    ASSERT_EQ(restored.rfind("RESTORED version=", 0), 0u) << restored << c.Logs();
    out->restored = std::strtoull(restored.c_str() + 17, nullptr, 10);
    out->restarted = true;
  }
  ASSERT_TRUE(c.WaitForWorkersToExit(seconds(120))) << c.Logs();
  ASSERT_EQ(c.worker(0).child->exit_code(), 0) << c.Logs();
  ExpectConsistent(c, o.steps);
  out->accuracy = JsonNumber(*c.worker(0).Find("done"), "test_accuracy", -1);
  if (kill) {
    // "restored at version C and the cluster is at step S: fast-forwarding"
    const std::string log = ReadFile(c.log_dir() + "/server-1.restart1.log");
    const size_t at = log.find("and the cluster is at step ");
    out->fast_forwarded_to =
        at == std::string::npos ? out->restored : std::strtoull(log.c_str() + at + 27, nullptr, 10);
  }
}

// kill -9 a server and restart it: it resumes from its checkpoint, at most K
// steps of its shard's updates are lost, and the final accuracy stays within
// 0.5 points of an undisturbed run.
TEST(FaultProcess, KilledServerResumesFromItsCheckpoint) {
  ServerRun calm, hit;
  ASSERT_NO_FATAL_FAILURE(RunWithOptionalServerKill(false, &calm));
  ASSERT_NO_FATAL_FAILURE(RunWithOptionalServerKill(true, &hit));
  ASSERT_TRUE(hit.restarted);
  EXPECT_EQ(hit.restored % 10, 0u) << "checkpoints are written every 10 steps";
  EXPECT_GE(hit.restored, 140u);
  const uint64_t lost = hit.fast_forwarded_to - hit.restored;
  EXPECT_LE(lost, 10u) << "more than K steps lost";
  ASSERT_GT(calm.accuracy, 0.5);
  EXPECT_NEAR(hit.accuracy, calm.accuracy, 0.005);
  std::printf("shard 1 resumed at version %llu, cluster at step %llu: %llu step(s) of its updates "
              "lost; accuracy %.4f vs %.4f undisturbed\n",
              (unsigned long long)hit.restored, (unsigned long long)hit.fast_forwarded_to,
              (unsigned long long)lost, hit.accuracy, calm.accuracy);
}

// A corrupt newest checkpoint is skipped with a message naming it, and the
// previous one is loaded. Lost: the steps between the two checkpoints.
TEST(FaultProcess, CorruptNewestCheckpointLoadsThePrevious) {
  ProcessClusterOptions o;
  o.name = "corrupt";
  o.servers = 1;
  o.workers = 0;
  o.checkpoints = true;
  ProcessCluster c(o);
  CheckpointOptions co;
  co.dir = c.checkpoint_dir();
  Checkpointer ck(co);
  ASSERT_TRUE(ck.Prepare().ok());
  ShardCheckpoint older;
  older.range = ShardRange{0, 4096};
  older.version = 10;
  for (size_t i = 0; i < 4096; ++i) {
    older.params.push_back(std::sin(0.01f * i));
    older.m.push_back(0.001f * i);
    older.v.push_back(0.002f * i);
  }
  older.replica = older.params;
  ASSERT_TRUE(ck.Write(older).ok());
  ShardCheckpoint newer = older;
  newer.version = 20;
  for (auto& x : newer.params) x += 1;
  auto newer_path = ck.Write(newer);
  ASSERT_TRUE(newer_path.ok());
  {
    std::fstream f(*newer_path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.write("garbage", 7);
  }
  ASSERT_TRUE(c.Start()) << c.Logs();
  std::vector<uint64_t> versions;
  ASSERT_TRUE(c.ShardVersions(&versions));
  EXPECT_EQ(versions[0], 10u);
  const std::string log = ReadFile(c.server(0).log_path());
  EXPECT_NE(log.find("skipping checkpoint " + *newer_path), std::string::npos) << log;
  EXPECT_NE(log.find("resumed from checkpoint"), std::string::npos) << log;
  // The server serves exactly the older checkpoint's replica.
  std::string crc;
  ASSERT_TRUE(c.ServerParamsCrc(&crc));
  uLong expect = crc32(0L, Z_NULL, 0);
  expect = crc32(expect, reinterpret_cast<const Bytef*>(older.replica.data()), 4096 * 4);
  EXPECT_EQ(crc, std::to_string(expect));
}

// SIGTERM to every process at once: all exit within a bounded time, the
// workers leave cleanly and every server writes a final checkpoint. Lost:
// the pushes held for the step in progress.
TEST(FaultProcess, SigtermToEveryProcessExitsCleanlyWithCheckpoints) {
  ProcessClusterOptions o;
  o.name = "sigterm";
  o.workers = 2;
  o.steps = 1000000;  // never finishes on its own
  o.checkpoints = true;
  o.checkpoint_every = 1000000;  // only the shutdown checkpoint
  ProcessCluster c(o);
  ASSERT_TRUE(c.Start());
  ASSERT_TRUE(c.WaitFor([&] { return EveryWorkerReported(c) && c.MaxStep() >= 30; }, seconds(90)))
      << c.Logs();
  const auto t0 = Clock::now();
  for (size_t i = 0; i < c.num_workers(); ++i) c.worker(i).child->Signal(SIGTERM);
  for (int k = 0; k < o.servers; ++k) c.server(k).Signal(SIGTERM);
  c.coordinator().Signal(SIGTERM);
  const bool all_exited = c.WaitFor(
      [&] {
        bool all = c.coordinator().Poll();
        for (int k = 0; k < o.servers; ++k) all = c.server(k).Poll() && all;
        for (size_t i = 0; i < c.num_workers(); ++i) all = c.worker(i).child->Poll() && all;
        return all;
      },
      seconds(30));
  ASSERT_TRUE(all_exited) << c.Logs();
  const auto ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
  c.Poll();
  EXPECT_EQ(c.coordinator().exit_code(), 0) << c.Logs();
  for (int k = 0; k < o.servers; ++k) EXPECT_EQ(c.server(k).exit_code(), 0) << c.Logs();
  for (size_t i = 0; i < c.num_workers(); ++i) {
    EXPECT_EQ(c.worker(i).child->exit_code(), 0) << c.Logs();
    EXPECT_NE(c.worker(i).Find("left"), nullptr) << "worker-" << i << " did not leave cleanly";
  }
  CheckpointOptions co;
  co.dir = c.checkpoint_dir();
  Checkpointer ck(co);
  for (uint32_t k = 0; k < static_cast<uint32_t>(o.servers); ++k) {
    auto saved = ck.LoadNewest(k, nullptr, nullptr);
    ASSERT_TRUE(saved.has_value()) << "shard " << k << " wrote no checkpoint\n" << c.Logs();
    EXPECT_GE(saved->version + 1, c.MaxStep()) << "the checkpoint is older than the last step";
  }
  std::printf("every process exited %lld ms after SIGTERM; lost: the pushes of the open step\n",
              (long long)ms);
}

}  // namespace
}  // namespace loco::test

namespace loco::test {
namespace {

// loco-launch's fault scenarios: a killed worker and a killed server are
// events, a joined worker takes part, and the summary says what was lost.
TEST(FaultLaunch, FaultsAreEventsAndTheSummarySaysWhatWasLost) {
  const std::string summary = std::string(::testing::TempDir()) + "/fault-launch-summary-" +
                              std::to_string(::getpid()) + ".json";
  LaunchResult r = RunLaunch("faults",
                             {"--servers=2", "--workers=3", "--steps=500",
                              "--heartbeat-timeout-ms=1500", "--checkpoint-every=10",
                              "--fault=kill-worker@60,join-worker@80", "--fault=kill-server@150:1",
                              "--summary-json=" + summary},
                             seconds(150));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto s = ParseFlatJson(ReadFile(summary));
  ASSERT_TRUE(s.has_value()) << ReadFile(summary);
  EXPECT_EQ(JsonNumber(*s, "steps", 0), 500);
  EXPECT_EQ(JsonNumber(*s, "workers_lost", -1), 1);
  EXPECT_EQ(JsonNumber(*s, "workers_joined", -1), 1);
  EXPECT_EQ(JsonNumber(*s, "server_restarts", -1), 1);
  // At most K = 10: a shard does not complete the step after a checkpoint is
  // due until that checkpoint is on disk.
  EXPECT_LE(JsonNumber(*s, "server_steps_lost", 99), 10);
  EXPECT_NE(r.out.find("event: server-1 died"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lost (killed by signal 9"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("faults: 1 worker(s) lost"), std::string::npos) << r.out;
}

// When every worker is lost, training cannot complete: the run fails and says so.
TEST(FaultLaunch, LosingEveryWorkerFailsTheRun) {
  LaunchResult r = RunLaunch("alllost", {"--servers=1", "--workers=1", "--steps=100000",
                                         "--fault=kill-worker@20"},
                             seconds(90));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("training cannot complete"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("worker-0"), std::string::npos) << r.err;
}

// A bad --fault is refused before anything starts, naming the accepted forms.
TEST(FaultLaunch, InvalidFaultIsRefused) {
  LaunchResult r = RunLaunch("badfault", {"--fault=kill-everything@3"}, seconds(30));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("kill-worker@STEP"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace loco::test

// "A coordinator restart pauses training, never ends it" (DESIGN §3), with
// real processes: the coordinator is SIGKILLed and started again with the
// same flags on its port (ProcessCluster::RestartCoordinator, with a state
// directory whose ticket key keeps the workers' tickets valid) at each
// point of a run's life. In every case each worker exits 0 having reported
// every step once, workers and servers agree on the parameters, and, where
// no server restarted, the parameters are those of an undisturbed run with
// the same seed: the outage loses no step. The pause each restart caused is
// printed and must stay within the outage + the heartbeat timeout + 5 s.
// Every wait is bounded.
//
// Labelled "coordinator_restart" in ctest: they need the coordinator's
// recovery (servers re-register, workers resume under their ids).
#include <gtest/gtest.h>

#include <csignal>

#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "tests/fault/process_checks.h"
#include "tests/fault/process_cluster.h"

namespace loco::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kSteps = 60;
constexpr int kWorkers = 2;
constexpr milliseconds kDown(1000);  // how long the coordinator stays dead
constexpr milliseconds kHeartbeatTimeout(3000);

// Two workers that start step 0 together (--wait-for-workers), so that every
// run splits the batches the same way and the final CRC is the seed's.
ProcessClusterOptions RestartOptions(const std::string& name) {
  ProcessClusterOptions o;
  o.name = name;
  o.servers = 2;
  o.workers = kWorkers;
  o.steps = kSteps;
  o.heartbeat_timeout_ms = kHeartbeatTimeout.count();
  o.heartbeat_interval_ms = 200;
  o.restartable_coordinator = true;
  o.reregister_ms = 200;
  o.worker_args = {"--wait-for-workers=" + std::to_string(kWorkers)};
  return o;
}

// Every worker exited 0, reported each step of [0, kSteps) exactly once,
// and all agree with the servers at kSteps.
void ExpectEveryStepOnceAndConsistent(ProcessCluster& c) {
  ASSERT_TRUE(c.WaitForWorkersToExit(seconds(60))) << "workers still running\n" << c.Logs();
  for (size_t i = 0; i < c.num_workers(); ++i) {
    EXPECT_EQ(c.worker(i).child->exit_code(), 0) << "worker-" << i << "\n" << c.Logs();
    std::map<uint64_t, int> reported;
    for (const FlatJson& e : c.worker(i).events) {
      auto kind = e.find("event");
      if (kind == e.end() || kind->second != "step") continue;
      ++reported[static_cast<uint64_t>(JsonNumber(e, "step", -1))];
    }
    for (uint64_t step = 0; step < kSteps; ++step) {
      EXPECT_EQ(reported[step], 1) << "worker-" << i << " reported step " << step << " "
                                   << reported[step] << " time(s)";
    }
  }
  ASSERT_NO_FATAL_FAILURE(ExpectConsistent(c, kSteps));
}

// The servers' CRC after an undisturbed run of RestartOptions (computed once).
const std::string& UndisturbedCrc() {
  static const std::string crc = [] {
    ProcessCluster c(RestartOptions("crc-undisturbed"));
    std::string out;
    EXPECT_TRUE(c.Start());
    if (!c.WaitForWorkersToExit(seconds(60))) {
      ADD_FAILURE() << "the undisturbed run did not finish\n" << c.Logs();
      return out;
    }
    EXPECT_TRUE(c.ServerParamsCrc(&out));
    return out;
  }();
  return crc;
}

void ExpectUndisturbedCrc(ProcessCluster& c) {
  const std::string& calm = UndisturbedCrc();
  ASSERT_FALSE(calm.empty());
  std::string crc;
  ASSERT_TRUE(c.ServerParamsCrc(&crc));
  EXPECT_EQ(crc, calm) << "the parameters differ from an undisturbed run with the same seed";
}

// Kills the coordinator, keeps it dead for `down`, starts it again; returns
// when it is serving (*killed_at: when the kill was sent).
::testing::AssertionResult KillAndRestart(ProcessCluster& c, milliseconds down,
                                          Clock::time_point* killed_at) {
  *killed_at = Clock::now();
  auto r = c.KillCoordinator();
  if (!r) return r;
  std::this_thread::sleep_for(down);
  c.Poll();
  return c.RestartCoordinator();
}

// Waits (bounded) until the cluster's step passes the one it had at the
// restart; prints and returns the pause from the kill, -1 on timeout.
int64_t MeasurePause(ProcessCluster& c, const char* what, Clock::time_point killed_at) {
  c.Poll();
  const uint64_t at_restart = c.MaxStep();
  if (at_restart >= kSteps) return 0;
  if (!c.WaitFor([&] { return c.MaxStep() > at_restart; }, seconds(30))) {
    ADD_FAILURE() << what << ": the step did not move within 30 s of the restart\n" << c.Logs();
    return -1;
  }
  const int64_t ms =
      std::chrono::duration_cast<milliseconds>(Clock::now() - killed_at).count();
  std::printf("%s: training paused %lld ms (coordinator dead %lld ms; step %llu at the restart)\n",
              what, (long long)ms, (long long)kDown.count(), (unsigned long long)at_restart);
  // The target: at most the outage plus the heartbeat timeout plus
  // a few seconds (here 5: reconnects, the recovery, a loaded machine).
  const int64_t bound = kDown.count() + kHeartbeatTimeout.count() + 5000;
  EXPECT_LE(ms, bound) << what << ": the pause passed outage + heartbeat timeout + 5 s\n"
                       << c.Logs();
  return ms;
}

// (a) Before any worker joined: the servers re-register with the new
// coordinator, and the workers then join it as if nothing happened.
TEST(CoordinatorRestart, BeforeAnyJoin) {
  ProcessClusterOptions o = RestartOptions("coord-before-join");
  o.workers = 0;
  ProcessCluster c(o);
  ASSERT_TRUE(c.Start());
  Clock::time_point killed_at;
  ASSERT_TRUE(KillAndRestart(c, kDown, &killed_at)) << c.Logs();
  for (int i = 0; i < kWorkers; ++i) ASSERT_TRUE(c.StartWorker());
  ASSERT_TRUE(c.WaitFor([&] { return c.MaxStep() >= 1; }, seconds(60))) << c.Logs();
  std::printf("before any join: first step %lld ms after the kill\n",
              (long long)std::chrono::duration_cast<milliseconds>(Clock::now() - killed_at)
                  .count());
  ASSERT_NO_FATAL_FAILURE(ExpectEveryStepOnceAndConsistent(c));
  ExpectUndisturbedCrc(c);
}

// (b) While the workers join: worker-0 has joined and waits for its peer;
// worker-1 is loading its data when the coordinator dies and joins during
// the outage or right after the restart.
TEST(CoordinatorRestart, WhileWorkersJoin) {
  ProcessClusterOptions o = RestartOptions("coord-while-join");
  o.workers = 0;
  ProcessCluster c(o);
  ASSERT_TRUE(c.Start());
  ASSERT_TRUE(c.StartWorker());
  ASSERT_TRUE(c.WaitFor([&] { return c.worker(0).Find("joined") != nullptr; }, seconds(60)))
      << c.Logs();
  ASSERT_TRUE(c.StartWorker());
  Clock::time_point killed_at;
  ASSERT_TRUE(KillAndRestart(c, kDown, &killed_at)) << c.Logs();
  ASSERT_TRUE(c.WaitFor([&] { return c.MaxStep() >= 1; }, seconds(60))) << c.Logs();
  std::printf("while workers join: first step %lld ms after the kill\n",
              (long long)std::chrono::duration_cast<milliseconds>(Clock::now() - killed_at)
                  .count());
  ASSERT_NO_FATAL_FAILURE(ExpectEveryStepOnceAndConsistent(c));
  ExpectUndisturbedCrc(c);
}

// (c) Between steps, once training runs: a pause, no step lost.
TEST(CoordinatorRestart, BetweenSteps) {
  ProcessCluster c(RestartOptions("coord-between-steps"));
  ASSERT_TRUE(c.Start());
  ASSERT_TRUE(c.WaitFor([&] { return EveryWorkerReported(c) && c.MaxStep() >= 20; },
                        seconds(60)))
      << c.Logs();
  Clock::time_point killed_at;
  ASSERT_TRUE(KillAndRestart(c, kDown, &killed_at)) << c.Logs();
  ASSERT_GE(MeasurePause(c, "between steps", killed_at), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectEveryStepOnceAndConsistent(c));
  ExpectUndisturbedCrc(c);
  // The restarted coordinator signed with the key its first start made in
  // its state directory, so both workers resumed under their ids.
  const std::string log = ReadFile(c.coordinator().log_path());
  EXPECT_NE(log.find("/ticket.key (kept)"), std::string::npos) << log;
  size_t resumed = 0;
  for (size_t at = log.find("resumed after the coordinator's restart"); at != std::string::npos;
       at = log.find("resumed after the coordinator's restart", at + 1)) {
    ++resumed;
  }
  EXPECT_EQ(resumed, static_cast<size_t>(kWorkers)) << log;
}

// (d) Killed again within one recovery window: the second kill comes before
// the step moved after the first restart.
TEST(CoordinatorRestart, TwiceWithinOneRecoveryWindow) {
  ProcessCluster c(RestartOptions("coord-twice"));
  ASSERT_TRUE(c.Start());
  ASSERT_TRUE(c.WaitFor([&] { return EveryWorkerReported(c) && c.MaxStep() >= 20; },
                        seconds(60)))
      << c.Logs();
  Clock::time_point first_kill, second_kill;
  ASSERT_TRUE(KillAndRestart(c, milliseconds(500), &first_kill)) << c.Logs();
  c.Poll();
  const uint64_t at_first_restart = c.MaxStep();
  // Shorter than the servers' re-registration period: the new coordinator
  // has not heard from everyone yet.
  std::this_thread::sleep_for(milliseconds(100));
  c.Poll();
  if (c.MaxStep() > at_first_restart) {
    std::printf("note: the step moved within 100 ms of the first restart\n");
  }
  ASSERT_TRUE(KillAndRestart(c, milliseconds(500), &second_kill)) << c.Logs();
  ASSERT_GE(MeasurePause(c, "killed twice", first_kill), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectEveryStepOnceAndConsistent(c));
  ExpectUndisturbedCrc(c);
}

// (e) Together with a server: shard 1 dies with the coordinator and comes
// back from its checkpoint. Its updates since the checkpoint are lost (as in
// FaultProcess.KilledServerResumesFromItsCheckpoint), so the parameters are
// compared among the cluster only, not with an undisturbed run.
TEST(CoordinatorRestart, TogetherWithAServerRestoredFromItsCheckpoint) {
  ProcessClusterOptions o = RestartOptions("coord-and-server");
  o.checkpoints = true;
  o.checkpoint_every = 10;
  ProcessCluster c(o);
  ASSERT_TRUE(c.Start());
  ASSERT_TRUE(c.WaitFor([&] { return EveryWorkerReported(c) && c.MaxStep() >= 25; },
                        seconds(60)))
      << c.Logs();
  c.server(1).Signal(SIGKILL);
  Clock::time_point killed_at;
  ASSERT_TRUE(KillAndRestart(c, kDown, &killed_at)) << c.Logs();
  ASSERT_TRUE(c.WaitFor([&] { return c.server(1).Poll(); }, seconds(10)));
  std::string restored;
  ASSERT_TRUE(c.RestartServer(1, &restored)) << c.Logs();
  ASSERT_EQ(restored.rfind("RESTORED version=", 0), 0u) << restored << c.Logs();
  ASSERT_GE(MeasurePause(c, "with a server restored", killed_at), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectEveryStepOnceAndConsistent(c));
  std::printf("shard 1 %s\n", restored.c_str());
}

// (f) Inside a step, one shard complete and one pending: shard 1's server is
// stopped (SIGSTOP), so the open step completes on shard 0 only; the
// coordinator is killed and restarted meanwhile, and shard 1 is continued
// once it is back. Its pending step must complete with the same workers.
TEST(CoordinatorRestart, InsideAStepWithOneShardCompleteAndOnePending) {
  ProcessCluster c(RestartOptions("coord-inside-step"));
  ASSERT_TRUE(c.Start());
  ASSERT_TRUE(c.WaitFor([&] { return EveryWorkerReported(c) && c.MaxStep() >= 20; },
                        seconds(60)))
      << c.Logs();
  c.server(1).Signal(SIGSTOP);
  // Long enough for shard 0 to complete the open step without shard 1.
  std::this_thread::sleep_for(milliseconds(300));
  Clock::time_point killed_at;
  const auto restarted = KillAndRestart(c, kDown, &killed_at);
  c.server(1).Signal(SIGCONT);
  ASSERT_TRUE(restarted) << c.Logs();
  ASSERT_GE(MeasurePause(c, "inside a step", killed_at), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectEveryStepOnceAndConsistent(c));
  ExpectUndisturbedCrc(c);
}

// (g) While a checkpoint is written: the servers checkpoint every 10 steps
// and the coordinator is killed as the cluster reaches step 30, when every
// shard's checkpoint of it is due. Checkpoints change no parameter, so the
// run still ends as an undisturbed one.
TEST(CoordinatorRestart, WhileACheckpointIsWritten) {
  ProcessClusterOptions o = RestartOptions("coord-checkpoint");
  o.checkpoints = true;
  o.checkpoint_every = 10;
  ProcessCluster c(o);
  ASSERT_TRUE(c.Start());
  ASSERT_TRUE(c.WaitFor([&] { return EveryWorkerReported(c) && c.MaxStep() >= 30; },
                        seconds(60)))
      << c.Logs();
  Clock::time_point killed_at;
  ASSERT_TRUE(KillAndRestart(c, kDown, &killed_at)) << c.Logs();
  ASSERT_GE(MeasurePause(c, "while a checkpoint is written", killed_at), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectEveryStepOnceAndConsistent(c));
  ExpectUndisturbedCrc(c);
}

}  // namespace

// loco-launch's kill-coordinator fault: the coordinator is killed at step 30
// and restarted on its port with its state directory; the run completes, the
// summary reports the restart and the pause it caused, and the restarted
// coordinator kept its ticket key.
TEST(FaultLaunch, KillCoordinatorIsAnEventWithItsPause) {
  const std::string summary = std::string(::testing::TempDir()) +
                              "/fault-launch-killcoord-summary-" + std::to_string(::getpid()) +
                              ".json";
  LaunchResult r = RunLaunch("killcoord",
                             {"--servers=2", "--workers=2", "--steps=120",
                              "--heartbeat-timeout-ms=3000", "--fault=kill-coordinator@30",
                              "--summary-json=" + summary},
                             seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto s = ParseFlatJson(ReadFile(summary));
  ASSERT_TRUE(s.has_value()) << ReadFile(summary);
  EXPECT_EQ(JsonNumber(*s, "steps", 0), 120);
  EXPECT_EQ(JsonNumber(*s, "workers_lost", -1), 0);
  EXPECT_EQ(JsonNumber(*s, "coordinator_restarts", -1), 1);
  EXPECT_GT(JsonNumber(*s, "coordinator_pause_s", -1), 0);
  EXPECT_NE(r.out.find("event: fault kill-coordinator@30: SIGKILL to the coordinator"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("event: coordinator restarted on"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("event: fault kill-coordinator@30: training paused"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 coordinator restart(s), training paused"), std::string::npos) << r.out;
  // The restarted coordinator signed with the key its first start made in
  // the state directory loco-launch gave it, so no worker had to join again.
  const std::string first = ReadFile(r.log_dir + "/coordinator.log");
  const std::string restarted = ReadFile(r.log_dir + "/coordinator.restart1.log");
  EXPECT_NE(first.find("ticket.key (new)"), std::string::npos) << first;
  EXPECT_NE(restarted.find("ticket.key (kept)"), std::string::npos) << restarted;
  std::printf("%s", r.out.c_str());
}

}  // namespace loco::test

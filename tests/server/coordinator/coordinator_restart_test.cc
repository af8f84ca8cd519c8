// A coordinator restarted with an empty memory on the same port (kill -9
// and a Deployment's restart): the servers' keepalive registration teaches
// it the shard map again, so a worker can join the restarted coordinator
// and receives the parameters the servers kept. With the keepalive off
// (what the servers did before), the restarted coordinator's view never
// becomes ready and the join times out. And two workers training through
// a restart (a new incarnation, the same ticket key) resume under their
// ids and lose no step: their parameters equal an undisturbed run's, bit
// for bit. In-process, over loopback gRPC.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "client/heartbeat_loop.h"
#include "client/worker.h"
#include "rpc/incarnation_trailer.h"
#include "rpc/reconnect_backoff.h"
#include "server/coordinator/coordinator_server.h"
#include "server/coordinator_client.h"
#include "security/transport_security.h"
#include "server/parameter_server.h"

namespace loco {
namespace {

using std::chrono::milliseconds;

constexpr size_t kElements = 1000;

CoordinatorServerOptions CoordinatorOn(int port, uint64_t incarnation = 0,
                                       const std::string& ticket_key_file = std::string()) {
  CoordinatorServerOptions o;
  o.coordinator.membership.incarnation = incarnation;
  o.coordinator.membership.recovery_window = milliseconds(incarnation > 0 ? 5000 : 0);
  o.coordinator.membership.min_recovery = milliseconds(400);  // two heartbeat intervals
  o.coordinator.ticket_key_file = ticket_key_file;
  o.security = TransportSecurityOptions::Insecure();  // loopback
  o.port = port;
  o.coordinator.membership.num_shards = 2;
  o.coordinator.membership.shard_align = 128;
  o.coordinator.heartbeat_interval = milliseconds(200);
  return o;
}

WorkerOptions WorkerFor(const std::string& coordinator) {
  WorkerOptions o;
  o.security = TransportSecurityOptions::Insecure();
  o.coordinator = coordinator;
  o.codec = PushCodec::kFp32;
  o.block_size = 128;
  o.rpc_timeout_ms = 2000;
  o.join_timeout_ms = 3000;
  o.max_retries = 2;
  return o;
}

// Two fp32-return shard servers of `coordinator`, registering again every
// `reregister` (0: never).
std::vector<std::unique_ptr<ParameterServer>> StartServers(const std::string& coordinator,
                                                           milliseconds reregister) {
  std::vector<std::unique_ptr<ParameterServer>> servers;
  for (uint32_t k = 0; k < 2; ++k) {
    ParameterServerOptions po;
    po.security = TransportSecurityOptions::Insecure();
    po.coordinator = coordinator;
    po.num_servers = 2;
    po.shard.shard_id = k;
    po.shard.return_path.codec = PullCodec::kFp32;
    po.reregister_interval = reregister;
    servers.push_back(std::make_unique<ParameterServer>(po));
    EXPECT_TRUE(servers.back()->Start().ok());
  }
  return servers;
}

// One coordinator and two servers (keepalive every `reregister`); a worker
// steps once; the coordinator is replaced by a fresh one on its port; a
// second worker tries to join it. Returns the second worker's Join status
// and, when it joined, the parameters it received.
struct RestartOutcome {
  Status joined;
  std::vector<float> before, received;
  uint64_t version = 0;
};

RestartOutcome RestartCoordinatorAndJoin(milliseconds reregister) {
  RestartOutcome out;
  auto first = std::make_unique<CoordinatorServer>(CoordinatorOn(0));
  auto port = first->Start();
  EXPECT_TRUE(port.ok()) << port.status().ToString();
  const std::string address = first->address();
  std::vector<std::unique_ptr<ParameterServer>> servers = StartServers(address, reregister);
  {
    auto w = Worker::Connect(WorkerFor(address));
    EXPECT_TRUE(w.ok());
    const Status joined = (*w)->Join(kElements);
    EXPECT_TRUE(joined.ok()) << joined.ToString();
    std::vector<float> init(kElements, 0.5f), grads(kElements, 0.1f);
    const Status initialized = (*w)->InitParameters(init, &out.before);
    EXPECT_TRUE(initialized.ok()) << initialized.ToString();
    auto r = (*w)->Step(grads, &out.before);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE((*w)->Leave().ok());
  }
  first->Shutdown(milliseconds(200));  // its memory is gone
  first.reset();
  CoordinatorServer second(CoordinatorOn(*port));
  auto again = second.Start();
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  {
    auto w = Worker::Connect(WorkerFor(address));
    EXPECT_TRUE(w.ok());
    out.joined = (*w)->Join(kElements);
    if (out.joined.ok()) {
      std::vector<float> mine(kElements, -1.0f);
      const Status received = (*w)->InitParameters(mine, &out.received);
      EXPECT_TRUE(received.ok()) << received.ToString();
      out.version = (*w)->step();
      EXPECT_TRUE((*w)->Leave().ok());
    }
  }
  for (auto& s : servers) s->Shutdown(milliseconds(200));
  second.Shutdown(milliseconds(200));
  return out;
}

TEST(CoordinatorRestart, ServersRegisterAgainSoAWorkerJoinsTheRestartedCoordinator) {
  const RestartOutcome out = RestartCoordinatorAndJoin(milliseconds(100));
  ASSERT_TRUE(out.joined.ok()) << out.joined.ToString();
  EXPECT_EQ(out.version, 1u) << "the servers' version survives the coordinator";
  EXPECT_EQ(out.received, out.before) << "the worker received the servers' parameters";
}

TEST(CoordinatorRestart, WithoutTheKeepaliveTheRestartedCoordinatorNeverGetsReady) {
  const RestartOutcome out = RestartCoordinatorAndJoin(milliseconds(0));
  EXPECT_EQ(out.joined.code(), StatusCode::kDeadlineExceeded) << out.joined.ToString();
}

// After an outage of several seconds, the servers dial the restarted
// coordinator within about a second of its return, not on gRPC's default
// reconnect schedule (1 s growing by 1.6x: after 6 s down, the next dial
// would come 2-4.6 s after the return, and the recovery, which waits for
// every server, would pause training that much longer).
TEST(CoordinatorRestart, ServersDialARestartedCoordinatorWithinASecondOfItsReturn) {
  auto first = std::make_unique<CoordinatorServer>(CoordinatorOn(0));
  auto port = first->Start();
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  const std::string address = first->address();
  std::vector<std::unique_ptr<ParameterServer>> servers = StartServers(address, milliseconds(100));
  {
    auto w = Worker::Connect(WorkerFor(address));
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Join(kElements).ok());
    std::vector<float> params;
    ASSERT_TRUE((*w)->InitParameters(std::vector<float>(kElements, 0.5f), &params).ok());
    ASSERT_TRUE((*w)->Leave().ok());
  }
  first->Shutdown(milliseconds(0));
  first.reset();
  std::this_thread::sleep_for(milliseconds(6000));  // the servers keep dialling meanwhile
  CoordinatorServer second(CoordinatorOn(*port));
  ASSERT_TRUE(second.Start().ok());
  const auto back = std::chrono::steady_clock::now();
  // A join succeeds once both servers have registered with `second`.
  WorkerOptions o = WorkerFor(address);
  o.join_timeout_ms = 8000;
  auto w = Worker::Connect(o);
  ASSERT_TRUE(w.ok());
  const Status joined = (*w)->Join(kElements);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - back).count();
  ASSERT_TRUE(joined.ok()) << joined.ToString();
  std::printf("after 6 s down: the servers registered again and a worker joined %.2f s after "
              "the coordinator's return\n", seconds);
  EXPECT_LT(seconds, 2.0) << "a server dialled the restarted coordinator late";
  EXPECT_TRUE((*w)->Leave().ok());
  for (auto& s : servers) s->Shutdown(milliseconds(200));
  second.Shutdown(milliseconds(200));
}

// A server ignores answers of an older coordinator incarnation than one it
// has seen (a stale coordinator process still answering on the address):
// the call fails as UNAVAILABLE, naming both, and is retried; a newer
// incarnation is taken.
TEST(CoordinatorRestart, AServerIgnoresAnswersOfAnOlderIncarnation) {
  auto newer = std::make_unique<CoordinatorServer>(CoordinatorOn(0, 5));
  auto port = newer->Start();
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  auto security = TransportSecurity::Load(TransportSecurityOptions::Insecure(),
                                          TransportRole::kServerAndClient);
  ASSERT_TRUE(security.ok());
  CoordinatorClient client(newer->address(), milliseconds(2000));
  client.Connect(**security);
  // Bounded: the channel redials at most 1 s apart after each restart.
  auto view_within = [&](int attempts) {
    StatusOr<v1::ClusterView> view = Unavailable("not asked");
    for (int i = 0; i < attempts && view.status().code() == StatusCode::kUnavailable &&
                    view.status().message().find("older") == std::string::npos;
         ++i) {
      view = client.GetClusterView();
      if (!view.ok()) std::this_thread::sleep_for(milliseconds(100));
    }
    return view;
  };
  auto first = view_within(30);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->incarnation(), 5u);

  newer->Shutdown(milliseconds(0));
  newer.reset();
  auto older = std::make_unique<CoordinatorServer>(CoordinatorOn(*port, 3));
  ASSERT_TRUE(older->Start().ok());
  auto stale = view_within(30);
  ASSERT_FALSE(stale.ok()) << "an answer of incarnation 3 was taken after 5";
  EXPECT_EQ(stale.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(stale.status().message().find("older than 5"), std::string::npos)
      << stale.status().ToString();

  older->Shutdown(milliseconds(0));
  older.reset();
  CoordinatorServer newest(CoordinatorOn(*port, 7));
  ASSERT_TRUE(newest.Start().ok());
  auto again = view_within(30);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->incarnation(), 7u);
  newest.Shutdown(milliseconds(200));
}

// A join waits out a coordinator outage for coordinator_outage_ms, not for
// the per-call retry budget (two retries here): it succeeds when the
// coordinator comes back 1.5 s later, and fails, saying why, when it stays
// away past the budget.
TEST(CoordinatorRestart, AJoinWaitsOutAnOutageWithinItsBudget) {
  auto probe = std::make_unique<CoordinatorServer>(CoordinatorOn(0));
  auto port = probe->Start();
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  const std::string address = probe->address();
  probe->Shutdown(milliseconds(0));
  probe.reset();  // the port is free: nothing answers there
  std::vector<std::unique_ptr<ParameterServer>> servers = StartServers(address, milliseconds(100));
  WorkerOptions o = WorkerFor(address);
  o.max_retries = 2;
  o.initial_backoff_ms = 10;
  o.max_backoff_ms = 100;
  o.retry_budget_ms = 200;
  o.join_timeout_ms = 10000;

  o.coordinator_outage_ms = 1000;
  {
    auto w = Worker::Connect(o);
    ASSERT_TRUE(w.ok());
    const auto t0 = std::chrono::steady_clock::now();
    const Status refused = (*w)->Join(kElements);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
    EXPECT_NE(refused.message().find("coordinator_outage_ms"), std::string::npos)
        << refused.ToString();
    EXPECT_GE(waited, 0.9) << "gave up before the outage budget";
    EXPECT_LT(waited, 6.0) << "waited far past the outage budget";
  }

  o.coordinator_outage_ms = 20000;
  auto w = Worker::Connect(o);
  ASSERT_TRUE(w.ok());
  Status joined = Unavailable("not joined");
  std::thread joiner([&] { joined = (*w)->Join(kElements); });
  std::this_thread::sleep_for(milliseconds(1500));  // past max_retries and retry_budget_ms
  CoordinatorServer back(CoordinatorOn(*port));
  ASSERT_TRUE(back.Start().ok());
  joiner.join();
  EXPECT_TRUE(joined.ok()) << joined.ToString();
  if (joined.ok()) {
    EXPECT_TRUE((*w)->Leave().ok());
  }
  for (auto& s : servers) s->Shutdown(milliseconds(200));
  back.Shutdown(milliseconds(200));
}

// A worker-ticket key of 32 hex digits in a temporary file (mode 0600),
// removed at the end of the test. Digits, not raw bytes: the loader drops
// trailing line breaks, so a raw key ending in '\n' would be one byte short.
class TicketKeyFile {
 public:
  TicketKeyFile() {
    char name[] = "/tmp/loco-ticket-key-XXXXXX";
    const int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    path_ = name;
    std::string key(32, '\0');
    for (size_t i = 0; i < key.size(); ++i) key[i] = "0123456789abcdef"[std::rand() & 15];
    EXPECT_EQ(write(fd, key.data(), key.size()), static_cast<ssize_t>(key.size()));
    close(fd);
    chmod(name, 0600);
  }
  ~TicketKeyFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Two workers step `steps` times with gradients fixed by (worker, step,
// world);
// with `restart_at`, the coordinator (incarnation 1) is shut down when
// worker 0 reaches that step and a new one (incarnation 2, same port, same
// ticket key) starts 300 ms later. Returns each worker's final parameters
// (empty on a failure) and, with a restart, the pause: from the shutdown
// until worker 0 completed its next step.
struct TrainingRun {
  std::vector<std::vector<float>> params{2};
  std::vector<Status> status{2};
  double pause_seconds = 0;
};

TrainingRun TrainTwoWorkers(uint64_t steps, uint64_t restart_at) {
  TicketKeyFile key;
  TrainingRun run;
  auto coordinator = std::make_unique<CoordinatorServer>(CoordinatorOn(0, 1, key.path()));
  auto port = coordinator->Start();
  if (!port.ok()) {  // else the workers would wait out their join budget
    ADD_FAILURE() << port.status().ToString();
    return run;
  }
  const std::string address = coordinator->address();
  std::vector<std::unique_ptr<ParameterServer>> servers =
      StartServers(address, milliseconds(100));
  std::atomic<uint64_t> worker0_step{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      WorkerOptions o = WorkerFor(address);
      o.step_timeout_ms = 30000;
      auto worker = Worker::Connect(o);
      if (!worker.ok()) {
        run.status[w] = worker.status();
        return;
      }
      Worker& me = **worker;
      run.status[w] = me.Join(kElements);
      std::vector<float> params;
      if (run.status[w].ok()) {
        run.status[w] = me.InitParameters(std::vector<float>(kElements, 0.25f), &params);
      }
      // Both take part from step 0.
      for (int i = 0; i < 500 && run.status[w].ok() && me.world_size() < 2; ++i) {
        std::this_thread::sleep_for(milliseconds(10));
      }
      while (run.status[w].ok() && me.step() < steps) {
        // The gradient depends on the world the worker holds, as a data
        // split does: a restart must not change it. (Not on the rank: the
        // two threads' join order, and so their ranks, differ between runs.)
        const float share = 1.0f / static_cast<float>(std::max<uint32_t>(me.world_size(), 1));
        std::vector<float> grads(kElements);
        for (size_t i = 0; i < kElements; ++i) {
          grads[i] =
              share * (0.01f * static_cast<float>((i * 7 + me.step() * 13 + w * 5) % 19) - 0.09f);
        }
        auto r = me.Step(grads, &params);
        if (!r.ok()) run.status[w] = r.status();
        if (w == 0) worker0_step = me.step();
      }
      if (run.status[w].ok()) run.status[w] = me.Leave();
      run.params[w] = params;
    });
  }
  if (restart_at > 0) {
    for (int i = 0; i < 3000 && worker0_step < restart_at; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    const uint64_t at = worker0_step;
    const auto killed = std::chrono::steady_clock::now();
    coordinator->Shutdown(milliseconds(0));
    coordinator.reset();
    std::this_thread::sleep_for(milliseconds(300));
    coordinator = std::make_unique<CoordinatorServer>(CoordinatorOn(*port, 2, key.path()));
    auto again = coordinator->Start();
    EXPECT_TRUE(again.ok()) << again.status().ToString();
    for (int i = 0; i < 3000 && worker0_step <= at + 1; ++i) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    run.pause_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  }
  for (std::thread& t : threads) t.join();
  for (auto& s : servers) s->Shutdown(milliseconds(200));
  coordinator->Shutdown(milliseconds(200));
  return run;
}

// A worker's heartbeat ignores a NOT_FOUND of an older coordinator
// incarnation than the one that admitted it (a stale coordinator process
// with the same ticket key, answering on the address, which never knew
// the worker): the worker stays a member. A newer coordinator that cannot
// resume it (no ticket key) expires it. Real coordinators on one loopback
// port. (A stale process with another key answers PERMISSION_DENIED,
// which never expired a worker.)
TEST(CoordinatorRestart, AWorkerIsNotExpiredByANotFoundOfAnOlderIncarnation) {
  TicketKeyFile key;
  auto options = [&](int port, uint64_t incarnation, bool with_key) {
    CoordinatorServerOptions o =
        CoordinatorOn(port, incarnation, with_key ? key.path() : std::string());
    o.coordinator.membership.recovery_window = milliseconds(0);  // joins at once
    return o;
  };
  auto admitting = std::make_unique<CoordinatorServer>(options(0, 5, true));
  auto port = admitting->Start();
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  grpc::ChannelArguments args;
  SetReconnectBackoff(&args, 200);
  auto stub = v1::Coordinator::NewStub(grpc::CreateCustomChannel(
      admitting->address(), grpc::InsecureChannelCredentials(), args));
  v1::JoinRequest join;
  join.set_name("w");
  join.set_total_elements(kElements);
  v1::JoinResponse joined;
  grpc::ClientContext join_ctx;
  join_ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(5000));
  ASSERT_TRUE(stub->Join(&join_ctx, join, &joined).ok());

  int expiries = 0;
  HeartbeatCallbacks cb;
  cb.on_expired = [&] { ++expiries; };
  HeartbeatLoop loop(stub.get(), joined.worker_id(), joined.ticket(), 1000, 2000, cb);
  ASSERT_TRUE(loop.BeatOnce().ok());

  // Beats until one is answered by the coordinator now on the port (not a
  // connection error); bounded: 50 tries, 100 ms apart.
  auto answered_beat = [&] {
    grpc::Status s;
    for (int i = 0; i < 50; ++i) {
      s = loop.BeatOnce();
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE ||
          s.error_message().find("incarnation") != std::string::npos) {
        break;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    return s;
  };

  admitting->Shutdown(milliseconds(0));
  admitting.reset();
  auto stale = std::make_unique<CoordinatorServer>(options(*port, 3, true));
  ASSERT_TRUE(stale->Start().ok());
  const grpc::Status ignored = answered_beat();
  EXPECT_EQ(ignored.error_code(), grpc::StatusCode::UNAVAILABLE) << ignored.error_message();
  EXPECT_NE(ignored.error_message().find("incarnation 3, older than 5"), std::string::npos)
      << ignored.error_message();
  EXPECT_EQ(expiries, 0) << "a coordinator older than the admitting one expired the worker";
  {
    // The real service's NOT_FOUND carries its incarnation.
    v1::HeartbeatRequest beat;
    beat.set_worker_id(joined.worker_id());
    beat.set_ticket(joined.ticket());
    v1::HeartbeatResponse answer;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(2000));
    EXPECT_EQ(stub->Heartbeat(&ctx, beat, &answer).error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(IncarnationTrailer(ctx), std::optional<uint64_t>(3));
  }

  stale->Shutdown(milliseconds(0));
  stale.reset();
  CoordinatorServer newer(options(*port, 7, false));
  ASSERT_TRUE(newer.Start().ok());
  const grpc::Status expired = answered_beat();
  EXPECT_EQ(expired.error_code(), grpc::StatusCode::NOT_FOUND) << expired.error_message();
  EXPECT_EQ(expiries, 1);
  newer.Shutdown(milliseconds(200));
}

TEST(CoordinatorRestart, WorkersResumeUnderTheirIdsAndNoStepIsLost) {
  const TrainingRun undisturbed = TrainTwoWorkers(30, 0);
  const TrainingRun restarted = TrainTwoWorkers(30, 10);
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(undisturbed.status[w].ok()) << undisturbed.status[w].ToString();
    ASSERT_TRUE(restarted.status[w].ok()) << "worker " << w << ": "
                                          << restarted.status[w].ToString();
  }
  EXPECT_EQ(restarted.params[0], restarted.params[1]);
  EXPECT_EQ(restarted.params[0], undisturbed.params[0])
      << "a step was lost or applied twice across the restart";
  std::printf("coordinator restart at step 10: training paused %.2f s, no step lost\n",
              restarted.pause_seconds);
}

}  // namespace
}  // namespace loco

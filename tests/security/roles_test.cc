// Role-separated credentials against real gRPC servers on loopback
// (docs/DESIGN.md §10): a worker credential cannot act as a server and the
// reverse, a worker cannot act for another worker's id (on the coordinator
// or on a shard), joins are bounded — and every refusal leaves the cluster
// view (or the shard's status) byte-identical and is counted.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "client/worker.h"
#include "metrics/metric_conventions.h"
#include "security/worker_ticket.h"
#include "tests/metrics/http_get.h"
#include "tests/metrics/prom_text.h"
#include "tests/security/secure_cluster.h"
#include "tests/security/test_pki.h"

namespace loco::test {
namespace {

class RolesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/loco-roles-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    worker_token_ = Write("worker-token", "worker-secret-1\n");
    server_token_ = Write("server-token", "server-secret-2\n");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(content.data(), 1, content.size(), f);
    std::fclose(f);
    return path;
  }

  // Plaintext with the two role tokens: the coordinator and the server.
  TransportSecurityOptions ServerSide() const {
    TransportSecurityOptions o = TransportSecurityOptions::Insecure();
    o.worker_token_file = worker_token_;
    o.server_token_file = server_token_;
    return o;
  }
  // A client presenting `token_file`.
  static TransportSecurityOptions Presenting(const std::string& token_file) {
    TransportSecurityOptions o = TransportSecurityOptions::Insecure();
    o.auth_token_file = token_file;
    return o;
  }
  std::unique_ptr<v1::Coordinator::Stub> Coordinator(SecureCluster& c, const std::string& token) {
    return v1::Coordinator::NewStub(
        SecureCluster::Channel(c.coordinator_address(), Presenting(token)));
  }

  std::string dir_, worker_token_, server_token_;
};

std::string Serialized(const google::protobuf::Message& message) {
  std::string bytes;
  EXPECT_TRUE(message.SerializeToString(&bytes));
  return bytes;
}

// The coordinator's answer to GetClusterView, serialized: what "no state
// change" is compared on.
std::string SerializedView(v1::Coordinator::Stub& stub) {
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  v1::ClusterView view;
  grpc::Status s = stub.GetClusterView(&ctx, v1::GetClusterViewRequest(), &view);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return Serialized(view);
}

// `metric`{rpc, reason} on the /metrics of `metrics_port`; -1 when the
// scrape fails.
double RejectedAt(int metrics_port, const char* metric, const std::string& rpc, StatusCode code) {
  auto body = HttpGet("127.0.0.1", metrics_port, "/metrics");
  if (!body.ok()) return -1;
  auto parsed = PromText::Parse(*body);
  if (!parsed.ok()) return -1;
  return parsed->Sum(metric, {{"rpc", rpc}, {"reason", ReasonLabel(code)}});
}

double Rejected(SecureCluster& c, const std::string& rpc, StatusCode code) {
  return RejectedAt(c.coordinator().metrics_port(), "loco_coordinator_requests_rejected_total", rpc,
                    code);
}

grpc::Status Join(v1::Coordinator::Stub& stub, v1::JoinResponse* resp,
                  uint64_t total_elements = kShardAlign) {
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  v1::JoinRequest req;
  req.set_name("roles-test");
  req.set_total_elements(total_elements);
  return stub.Join(&ctx, req, resp);
}

grpc::Status Heartbeat(v1::Coordinator::Stub& stub, uint64_t id, const std::string& ticket) {
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  v1::HeartbeatRequest req;
  req.set_worker_id(id);
  req.set_ticket(ticket);
  v1::HeartbeatResponse resp;
  return stub.Heartbeat(&ctx, req, &resp);
}

grpc::Status Leave(v1::Coordinator::Stub& stub, uint64_t id, const std::string& ticket) {
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  v1::LeaveRequest req;
  req.set_worker_id(id);
  req.set_ticket(ticket);
  v1::LeaveResponse resp;
  return stub.Leave(&ctx, req, &resp);
}

TEST_F(RolesTest, AWorkerCredentialCannotRegisterAServerOrAskForParticipants) {
  SecureCluster cluster(ServerSide());
  ASSERT_TRUE(cluster.Start());  // the server registered with the server token
  auto worker = Coordinator(cluster, worker_token_);
  v1::JoinResponse joined;
  ASSERT_TRUE(Join(*worker, &joined).ok());
  const std::string before = SerializedView(*worker);

  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    v1::RegisterServerRequest req;
    req.set_shard_id(0);
    req.set_address("attacker.example:443");
    v1::RegisterServerResponse resp;
    grpc::Status s = worker->RegisterServer(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    v1::StepParticipantsRequest req;
    req.set_step(7);
    v1::StepParticipantsResponse resp;
    grpc::Status s = worker->GetStepParticipants(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  }
  EXPECT_EQ(SerializedView(*worker), before) << "a refused call changed the view";
  EXPECT_EQ(Rejected(cluster, "register_server", StatusCode::kPermissionDenied), 1);
  EXPECT_EQ(Rejected(cluster, "get_step_participants", StatusCode::kPermissionDenied), 1);

  // The server token may register (the shard's own server re-registering).
  auto server = Coordinator(cluster, server_token_);
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  v1::RegisterServerRequest req;
  req.set_shard_id(0);
  req.set_address(cluster.server_address());
  v1::RegisterServerResponse resp;
  EXPECT_TRUE(server->RegisterServer(&ctx, req, &resp).ok());
}

TEST_F(RolesTest, AServerCredentialCannotJoinOrActAsAWorker) {
  SecureCluster cluster(ServerSide());
  ASSERT_TRUE(cluster.Start());
  auto server = Coordinator(cluster, server_token_);
  const std::string before = SerializedView(*server);
  v1::JoinResponse resp;
  EXPECT_EQ(Join(*server, &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(SerializedView(*server), before);
  EXPECT_EQ(Rejected(cluster, "join", StatusCode::kPermissionDenied), 1);

  // Nor push to a shard: Push is for the worker role.
  auto shard = v1::ParameterServer::NewStub(
      SecureCluster::Channel(cluster.server_address(), Presenting(server_token_)));
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  v1::PushRequest push;
  push.set_worker_id(1);
  v1::PushResponse pushed;
  EXPECT_EQ(shard->Push(&ctx, push, &pushed).error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(RolesTest, AnotherWorkersIdCannotBeKeptAliveOrMadeToLeave) {
  SecureCluster cluster(ServerSide());
  ASSERT_TRUE(cluster.Start());
  auto stub = Coordinator(cluster, worker_token_);
  v1::JoinResponse a, b;
  ASSERT_TRUE(Join(*stub, &a).ok());
  ASSERT_TRUE(Join(*stub, &b).ok());
  ASSERT_EQ(a.ticket().size(), WorkerTicketKey::kTicketChars);
  ASSERT_NE(a.ticket(), b.ticket());
  const std::string before = SerializedView(*stub);

  // Worker b, holding the same worker credential, tries to act as a.
  for (const std::string& ticket : {b.ticket(), std::string()}) {
    EXPECT_EQ(Heartbeat(*stub, a.worker_id(), ticket).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(Leave(*stub, a.worker_id(), ticket).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(SerializedView(*stub), before) << "a refused call changed the view";
  EXPECT_EQ(Rejected(cluster, "heartbeat", StatusCode::kPermissionDenied), 2);
  EXPECT_EQ(Rejected(cluster, "leave", StatusCode::kPermissionDenied), 2);

  // Each with its own ticket: accepted.
  EXPECT_TRUE(Heartbeat(*stub, a.worker_id(), a.ticket()).ok());
  EXPECT_TRUE(Leave(*stub, b.worker_id(), b.ticket()).ok());
}

// The shard's state as ShardStatus reports it, serialized: what "no state
// change" is compared on for shard calls.
std::string SerializedShardStatus(v1::ParameterServer::Stub& shard) {
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  v1::ShardStatusRequest req;
  v1::ShardStatusResponse resp;
  grpc::Status s = shard.ShardStatus(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return Serialized(resp);
}

double ShardRejected(SecureCluster& c, const std::string& rpc, StatusCode code) {
  return RejectedAt(c.server().metrics_port(), "loco_server_requests_rejected_total", rpc, code);
}

v1::InitShardRequest InitAs(uint64_t worker_id, const std::string& ticket) {
  v1::InitShardRequest req;
  req.set_worker_id(worker_id);
  req.set_ticket(ticket);
  req.set_shard_id(0);
  v1::Payload* p = req.mutable_params();
  p->set_codec(v1::CODEC_FP32);
  p->set_offset(0);
  p->set_length(kShardAlign);
  p->mutable_data()->assign(kShardAlign * sizeof(float), '\0');
  return req;
}

// A valid fp32 push of step 0 over the whole (one-shard) model.
v1::PushRequest PushAs(uint64_t worker_id, const std::string& ticket) {
  v1::PushRequest req;
  req.set_worker_id(worker_id);
  req.set_ticket(ticket);
  req.set_shard_id(0);
  req.set_step(0);
  v1::Payload* g = req.mutable_gradient();
  g->set_codec(v1::CODEC_FP32);
  g->set_offset(0);
  g->set_length(kShardAlign);
  const std::vector<float> ones(kShardAlign, 1.0f);
  g->set_data(reinterpret_cast<const char*>(ones.data()), ones.size() * sizeof(float));
  return req;
}

grpc::Status Push(v1::ParameterServer::Stub& shard, const v1::PushRequest& req) {
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  v1::PushResponse resp;
  return shard.Push(&ctx, req, &resp);
}

// The same push as a PushStream of one chunk (header, then the data in order).
grpc::Status PushStream(v1::ParameterServer::Stub& shard, const v1::PushRequest& req) {
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  v1::PushResponse resp;
  auto writer = shard.PushStream(&ctx, &resp);
  v1::PushChunk chunk;
  *chunk.mutable_header() = req;
  chunk.mutable_header()->mutable_gradient()->clear_data();
  chunk.set_data(req.gradient().data());
  writer->Write(chunk);
  writer->WritesDone();
  return writer->Finish();
}

grpc::Status Pull(v1::ParameterServer::Stub& shard, uint64_t worker_id, const std::string& ticket) {
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  v1::PullRequest req;
  req.set_worker_id(worker_id);
  req.set_ticket(ticket);
  req.set_shard_id(0);
  req.set_want_full(true);
  v1::PullResponse resp;
  return shard.Pull(&ctx, req, &resp);
}

grpc::Status InitShard(v1::ParameterServer::Stub& shard, const v1::InitShardRequest& req) {
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  v1::InitShardResponse resp;
  return shard.InitShard(&ctx, req, &resp);
}

TEST_F(RolesTest, AnotherWorkersIdCannotInitPushOrPullOnAShard) {
  SecureCluster cluster(ServerSide());
  ASSERT_TRUE(cluster.Start());
  auto coordinator = Coordinator(cluster, worker_token_);
  v1::JoinResponse a, b;
  ASSERT_TRUE(Join(*coordinator, &a).ok());
  ASSERT_TRUE(Join(*coordinator, &b).ok());
  auto shard = v1::ParameterServer::NewStub(
      SecureCluster::Channel(cluster.server_address(), Presenting(worker_token_)));
  const uint64_t id = a.worker_id();

  // Worker b, holding the same worker credential, tries to act as a: with
  // its own ticket, and with none. Each call is otherwise valid.
  const std::string fresh = SerializedShardStatus(*shard);
  for (const std::string& ticket : {b.ticket(), std::string()}) {
    EXPECT_EQ(InitShard(*shard, InitAs(id, ticket)).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(SerializedShardStatus(*shard), fresh) << "a refused InitShard initialised the shard";
  ASSERT_TRUE(InitShard(*shard, InitAs(id, a.ticket())).ok());

  const std::string initialised = SerializedShardStatus(*shard);
  for (const std::string& ticket : {b.ticket(), std::string()}) {
    EXPECT_EQ(Push(*shard, PushAs(id, ticket)).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(PushStream(*shard, PushAs(id, ticket)).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(Pull(*shard, id, ticket).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(SerializedShardStatus(*shard), initialised) << "a refused push was taken";
  EXPECT_EQ(ShardRejected(cluster, "init_shard", StatusCode::kPermissionDenied), 2);
  EXPECT_EQ(ShardRejected(cluster, "push", StatusCode::kPermissionDenied), 4);
  EXPECT_EQ(ShardRejected(cluster, "pull", StatusCode::kPermissionDenied), 2);

  // Each with its own ticket: accepted (the push waits in the open step for b).
  EXPECT_TRUE(Pull(*shard, id, a.ticket()).ok());
  grpc::Status pushed = PushStream(*shard, PushAs(id, a.ticket()));
  EXPECT_TRUE(pushed.ok()) << pushed.error_message();
  pushed = Push(*shard, PushAs(b.worker_id(), b.ticket()));
  EXPECT_TRUE(pushed.ok()) << pushed.error_message();
}

// A coordinator restarted without a kept ticket key signs with a new one:
// the server learns it when it registers again, a worker that joins again
// trains on, and the tickets of the old key are refused on the shard.
TEST_F(RolesTest, ARestartedCoordinatorsNewKeyReachesTheShardAndOldTicketsAreRefused) {
  SecureCluster cluster(ServerSide());
  ASSERT_TRUE(cluster.Start());
  auto w = Worker::Connect(cluster.WorkerFor(Presenting(worker_token_)));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  constexpr size_t n = kShardAlign;
  ASSERT_TRUE((*w)->Join(n).ok());
  std::vector<float> params;
  ASSERT_TRUE((*w)->InitParameters(std::vector<float>(n, 0.5f), &params).ok());
  const std::vector<float> grads(n, 1.0f);
  ASSERT_TRUE((*w)->Step(grads, &params).ok());
  const uint64_t old_id = (*w)->worker_id();
  // The old ticket, as a worker of the first coordinator holds it.
  auto coordinator = Coordinator(cluster, worker_token_);
  v1::JoinResponse old_member;
  ASSERT_TRUE(Join(*coordinator, &old_member, n).ok());

  ASSERT_TRUE(cluster.RestartCoordinator());
  for (int i = 0; i < 100 && !(*w)->expired(); ++i) {  // bounded: 100 x 100 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE((*w)->expired()) << "the restarted coordinator does not know the worker";
  const Status rejoined = (*w)->Rejoin(std::vector<float>(n, 0.5f), &params);
  ASSERT_TRUE(rejoined.ok()) << rejoined.ToString();
  EXPECT_NE((*w)->worker_id(), old_id) << "a new key: the worker joined under a new id";
  auto r = (*w)->Step(grads, &params);
  ASSERT_TRUE(r.ok()) << r.status().ToString();

  auto shard = v1::ParameterServer::NewStub(
      SecureCluster::Channel(cluster.server_address(), Presenting(worker_token_)));
  const grpc::Status old = Pull(*shard, old_member.worker_id(), old_member.ticket());
  EXPECT_EQ(old.error_code(), grpc::StatusCode::PERMISSION_DENIED) << old.error_message();
  EXPECT_NE(old.error_message().find("join again"), std::string::npos) << old.error_message();
  EXPECT_TRUE((*w)->Leave().ok());
}

// A ticket of a key the server has not learned (here: the coordinator
// restarted and the server's keepalive is a minute away) is UNAVAILABLE,
// and makes the server register again at once: the retry passes within a
// second, not at the keepalive.
TEST_F(RolesTest, ATicketOfAnUnknownKeyMakesTheServerLearnTheKeyAtOnce) {
  SecureCluster cluster(ServerSide());
  cluster.SetReregisterInterval(std::chrono::milliseconds(60000));
  ASSERT_TRUE(cluster.Start());
  ASSERT_TRUE(cluster.RestartCoordinator());
  auto coordinator = Coordinator(cluster, worker_token_);
  v1::JoinResponse joined;  // admitted, though the view is not ready yet
  ASSERT_TRUE(Join(*coordinator, &joined).ok());
  auto shard = v1::ParameterServer::NewStub(
      SecureCluster::Channel(cluster.server_address(), Presenting(worker_token_)));
  const grpc::Status first = Pull(*shard, joined.worker_id(), joined.ticket());
  ASSERT_EQ(first.error_code(), grpc::StatusCode::UNAVAILABLE) << first.error_message();
  EXPECT_NE(first.error_message().find("has not learned"), std::string::npos)
      << first.error_message();
  const auto asked = std::chrono::steady_clock::now();
  // Past the ticket, the pull meets the shard's own state (no range yet):
  // only the ticket's refusal is looked for.
  const auto ticket_refused = [](const grpc::Status& s) {
    return s.error_message().find("ticket") != std::string::npos;
  };
  grpc::Status later = first;
  for (int i = 0; i < 100 && ticket_refused(later); ++i) {  // bounded: 100 x 20 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    later = Pull(*shard, joined.worker_id(), joined.ticket());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  EXPECT_FALSE(ticket_refused(later)) << later.error_message();
  EXPECT_LT(seconds, 1.5) << "the key came with the keepalive, not at once";
}

TEST_F(RolesTest, AServerThatSeparatesRolesRefusesACoordinatorThatDoesNot) {
  // The coordinator takes one token for everything (the server token, which
  // the server presents): it sends no ticket key, so the server could not
  // check the worker ids of its calls.
  SecureCluster cluster(ServerSide());
  cluster.SetCoordinatorSecurity(Presenting(server_token_));
  const ::testing::AssertionResult started = cluster.Start();
  ASSERT_FALSE(started);
  EXPECT_NE(std::string(started.message()).find("sent no worker-ticket key"), std::string::npos)
      << started.message();
  EXPECT_EQ(cluster.server().fatal_status().code(), StatusCode::kFailedPrecondition);
}

// A server whose token the coordinator does not accept (a wrong
// --server-token-file) gives up at once and says what to check, instead of
// retrying for --register-timeout-s (2 minutes): no retry can make the
// token right.
TEST_F(RolesTest, AServerWhoseTokenTheCoordinatorRefusesGivesUpAtOnce) {
  const std::string wrong = dir_ + "/wrong-server.token";
  std::ofstream(wrong) << "not-the-coordinators-server-token\n";
  TransportSecurityOptions server = ServerSide();
  server.server_token_file = wrong;
  SecureCluster cluster(server);
  cluster.SetCoordinatorSecurity(ServerSide());
  const ::testing::AssertionResult started = cluster.Start();
  ASSERT_FALSE(started);
  const Status fatal = cluster.server().fatal_status();
  EXPECT_TRUE(fatal.code() == StatusCode::kUnauthenticated ||
              fatal.code() == StatusCode::kPermissionDenied)
      << fatal.ToString();
  EXPECT_NE(fatal.message().find("the coordinator refused this server's credential: check "
                                 "--server-token-file"),
            std::string::npos)
      << fatal.ToString();
  EXPECT_FALSE(cluster.server().registered());
}

TEST_F(RolesTest, AJoinFloodPastMaxWorkersIsRefusedAndCounted) {
  SecureCluster cluster(ServerSide());
  cluster.SetMaxWorkers(3);
  ASSERT_TRUE(cluster.Start());
  auto stub = Coordinator(cluster, worker_token_);
  for (int i = 0; i < 3; ++i) {
    v1::JoinResponse resp;
    ASSERT_TRUE(Join(*stub, &resp).ok());
  }
  const std::string before = SerializedView(*stub);
  for (int i = 0; i < 20; ++i) {
    v1::JoinResponse resp;
    grpc::Status s = Join(*stub, &resp);
    ASSERT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_NE(s.error_message().find("--max-workers 3"), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(SerializedView(*stub), before);
  EXPECT_EQ(Rejected(cluster, "join", StatusCode::kResourceExhausted), 20);
}

TEST_F(RolesTest, AWorkerTrainsAStepWithRoleTokens) {
  SecureCluster cluster(ServerSide());
  ASSERT_TRUE(cluster.Start());
  auto w = Worker::Connect(cluster.WorkerFor(Presenting(worker_token_)));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  constexpr size_t n = 2 * kShardAlign;
  ASSERT_TRUE((*w)->Join(n).ok());
  std::vector<float> initial(n, 0.5f), grads(n, 1.0f), params;
  ASSERT_TRUE((*w)->InitParameters(initial, &params).ok());
  auto r = (*w)->Step(grads, &params);  // the shard asks participants as a server
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*w)->step(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // heartbeats carry the ticket
  EXPECT_FALSE((*w)->expired());
  EXPECT_TRUE((*w)->Leave().ok());
  auto stub = Coordinator(cluster, worker_token_);
  v1::ClusterView view;
  ASSERT_TRUE(view.ParseFromString(SerializedView(*stub)));
  EXPECT_EQ(view.worker_ids_size(), 0) << "Leave with the worker's own ticket was accepted";
  EXPECT_EQ(Rejected(cluster, "heartbeat", StatusCode::kPermissionDenied), 0);
}

// Roles from client certificates: the coordinator and the shard serve with
// the shard-0 server certificate (which the server also presents when it
// registers); callers present the certificate of the role they claim.
TEST(CertificateRoles, TheClientCertificateDecidesTheRoleAndTheShard) {
  auto made = TestPki::Create();
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const TestPki& p = *made;
  TransportSecurityOptions server;
  server.tls_cert = p.role_shard0_cert;
  server.tls_key = p.role_shard0_key;
  server.tls_ca = p.ca;
  server.tls_client_auth = true;
  server.tls_client_roles = true;
  SecureCluster cluster(server);
  ASSERT_TRUE(cluster.Start()) << "the shard-0 certificate registers shard 0";
  auto as = [&](const std::string& cert, const std::string& key) {
    TransportSecurityOptions o;
    o.tls_ca = p.ca;
    o.tls_cert = cert;
    o.tls_key = key;
    return v1::Coordinator::NewStub(SecureCluster::Channel(cluster.coordinator_address(), o));
  };
  auto worker = as(p.role_worker_cert, p.role_worker_key);
  auto shard1 = as(p.role_shard1_cert, p.role_shard1_key);
  auto any_server = as(p.role_any_server_cert, p.role_any_server_key);
  auto no_role = as(p.client_cert, p.client_key);

  v1::JoinResponse joined;
  ASSERT_TRUE(Join(*worker, &joined).ok());
  const std::string before = SerializedView(*worker);
  auto register_shard0 = [&](v1::Coordinator::Stub& stub) {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    v1::RegisterServerRequest req;
    req.set_shard_id(0);
    req.set_address("attacker.example:443");
    v1::RegisterServerResponse resp;
    return stub.RegisterServer(&ctx, req, &resp);
  };
  // A worker certificate is no server; a shard-1 certificate may not
  // register shard 0; a server of any shard is another identity than the
  // one that registered shard 0.
  EXPECT_EQ(register_shard0(*worker).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  grpc::Status wrong_shard = register_shard0(*shard1);
  EXPECT_EQ(wrong_shard.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(wrong_shard.error_message().find("shard 1 only"), std::string::npos)
      << wrong_shard.error_message();
  grpc::Status other_identity = register_shard0(*any_server);
  EXPECT_EQ(other_identity.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(other_identity.error_message().find("another server identity"), std::string::npos)
      << other_identity.error_message();
  // A shard-1 certificate may not ask for shard 0's participants either
  // (the question moves shard 0's open step on the coordinator); a server
  // certificate that names no shard may.
  auto participants_of_shard0 = [&](v1::Coordinator::Stub& stub) {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    v1::StepParticipantsRequest req;
    req.set_step(0);
    req.set_shard_id(0);
    v1::StepParticipantsResponse resp;
    return stub.GetStepParticipants(&ctx, req, &resp);
  };
  grpc::Status wrong_scope = participants_of_shard0(*shard1);
  EXPECT_EQ(wrong_scope.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(wrong_scope.error_message().find("GetStepParticipants for shard 0 refused"),
            std::string::npos)
      << wrong_scope.error_message();
  EXPECT_TRUE(participants_of_shard0(*any_server).ok());
  EXPECT_EQ(Rejected(cluster, "get_step_participants", StatusCode::kPermissionDenied), 1);
  // A certificate without a role name joins nothing; a server cannot join.
  v1::JoinResponse refused;
  EXPECT_EQ(Join(*no_role, &refused).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Join(*shard1, &refused).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(SerializedView(*worker), before) << "a refused call changed the view";
  EXPECT_EQ(Rejected(cluster, "register_server", StatusCode::kPermissionDenied), 3);
  EXPECT_EQ(Rejected(cluster, "join", StatusCode::kPermissionDenied), 2);
  // The worker's ticket still keeps it alive.
  EXPECT_TRUE(Heartbeat(*worker, joined.worker_id(), joined.ticket()).ok());
  std::filesystem::remove_all(p.dir);
}

}  // namespace
}  // namespace loco::test

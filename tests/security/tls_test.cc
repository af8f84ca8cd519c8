// Transport security against real gRPC servers on loopback: TLS, mutual
// TLS, bearer tokens, the plaintext health port, and that a refused call
// changes nothing and is counted by reason on the live /metrics endpoint.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include "client/worker.h"
#include "health.grpc.pb.h"
#include "tests/common/says.h"
#include "tests/security/secure_cluster.h"
#include "tests/security/test_pki.h"

namespace loco::test {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One PKI for the whole test program (openssl takes a second or two).
class PkiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    auto p = TestPki::Create();
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    pki = std::make_unique<TestPki>(std::move(p).value());
    token = pki->WriteFile("token", "correct-horse-battery-staple\n");
    wrong_token = pki->WriteFile("wrong-token", "correct-horse-battery-stapler\n");
  }
  void TearDown() override {
    if (pki) std::filesystem::remove_all(pki->dir);
  }
  std::unique_ptr<TestPki> pki;
  std::string token, wrong_token;
};
PkiEnvironment* env = nullptr;
const ::testing::Environment* const kRegistered = ::testing::AddGlobalTestEnvironment(
    env = new PkiEnvironment());

// What the servers use: TLS with the server certificate, CA to verify the
// coordinator (the server is its client) and, with client_auth, clients.
TransportSecurityOptions ServerTls(bool client_auth, bool token) {
  TransportSecurityOptions o;
  o.tls_cert = env->pki->server_cert;
  o.tls_key = env->pki->server_key;
  o.tls_ca = env->pki->ca;
  o.tls_client_auth = client_auth;
  if (token) o.auth_token_file = env->token;
  return o;
}

TransportSecurityOptions ClientTls(const std::string& ca, const std::string& cert = "",
                                   const std::string& key = "", const std::string& token = "") {
  TransportSecurityOptions o;
  o.tls_ca = ca;
  o.tls_cert = cert;
  o.tls_key = key;
  o.auth_token_file = token;
  return o;
}

grpc::Status GetView(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::Coordinator::NewStub(channel);
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  v1::ClusterView view;
  return stub->GetClusterView(&ctx, v1::GetClusterViewRequest(), &view);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A handshake refusal: the call never reaches a handler.
::testing::AssertionResult RefusedInHandshake(const grpc::Status& s) {
  if (s.error_code() != grpc::StatusCode::UNAVAILABLE) {
    return ::testing::AssertionFailure()
           << "code " << s.error_code() << " (" << s.error_message() << "), expected UNAVAILABLE";
  }
  return ::testing::AssertionSuccess() << s.error_message();
}

TEST(Tls, AWorkerTrainsAStepThroughTls) {
  SecureCluster cluster(ServerTls(false, false));
  ASSERT_TRUE(cluster.Start());
  auto w = Worker::Connect(cluster.WorkerFor(ClientTls(env->pki->ca)));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  constexpr size_t n = 2 * kShardAlign;
  ASSERT_TRUE((*w)->Join(n).ok());
  std::vector<float> initial(n), grads(n), params;
  for (size_t i = 0; i < n; ++i) {
    initial[i] = 0.01f * static_cast<float>(i);
    grads[i] = (i % 3 == 0 ? -1.0f : 1.0f) * (0.5f + 0.001f * static_cast<float>(i));
  }
  ASSERT_TRUE((*w)->InitParameters(initial, &params).ok());
  auto r = (*w)->Step(grads, &params);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*w)->step(), 1u);
  // One AdamW step from zero moments with bias correction: the update is
  // lr * g / (|g| + eps) (default lr 1e-3, eps 1e-8, no weight decay).
  for (size_t i = 0; i < n; ++i) {
    const double g = grads[i];
    const double expect = initial[i] - 1e-3 * g / (std::fabs(g) + 1e-8);
    ASSERT_NEAR(params[i], expect, 1e-6) << "element " << i;
  }
  EXPECT_TRUE((*w)->Leave().ok());
}

// A --tls-key that is not the key of --tls-cert was accepted by Load and
// failed only when the server started (or at a client's first handshake),
// saying nothing of which file was wrong: Load refuses it, naming both
// files. A file that holds a PEM block but no certificate or key is
// refused too. The right pair loads, for the server and the client role.
TEST(Tls, AKeyThatIsNotTheCertificatesIsRefusedWhenLoaded) {
  TransportSecurityOptions o = ServerTls(false, false);
  o.tls_key = env->pki->client_key;
  const Status mismatched = TransportSecurity::Load(o, TransportRole::kServer).status();
  EXPECT_EQ(mismatched.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mismatched.message(),
            "--tls-key '" + env->pki->client_key + "' is not the private key of --tls-cert '" +
                env->pki->server_cert +
                "' (the certificate carries another public key); expected the key the "
                "certificate was issued for");
  const TransportSecurityOptions client =
      ClientTls(env->pki->ca, env->pki->client_cert, env->pki->other_client_key);
  EXPECT_TRUE(Says(TransportSecurity::Load(client, TransportRole::kClient).status().message(),
                   {"is not the private key of --tls-cert"}));
  o.tls_key = env->pki->server_cert;  // a PEM block, but a certificate
  EXPECT_TRUE(Says(TransportSecurity::Load(o, TransportRole::kServer).status().message(),
                   {"--tls-key '" + env->pki->server_cert + "' holds no private key"}));
  o = ServerTls(false, false);
  o.tls_cert = env->pki->server_key;
  EXPECT_TRUE(Says(TransportSecurity::Load(o, TransportRole::kServer).status().message(),
                   {"--tls-cert '" + env->pki->server_key + "' holds no certificate"}));
  EXPECT_TRUE(TransportSecurity::Load(ServerTls(true, false), TransportRole::kServer).ok());
  EXPECT_TRUE(
      TransportSecurity::Load(ClientTls(env->pki->ca, env->pki->client_cert, env->pki->client_key),
                              TransportRole::kClient)
          .ok());
}

TEST(Tls, APlaintextClientCannotTalkToATlsServer) {
  SecureCluster cluster(ServerTls(false, false));
  ASSERT_TRUE(cluster.Start());
  auto plain = SecureCluster::Channel(cluster.coordinator_address(),
                                      TransportSecurityOptions::Insecure());
  EXPECT_TRUE(RefusedInHandshake(GetView(plain)));
  // The same server answers a TLS client (the refusal was the plaintext).
  EXPECT_TRUE(GetView(SecureCluster::Channel(cluster.coordinator_address(),
                                             ClientTls(env->pki->ca)))
                  .ok());
}

TEST(Tls, AClientTrustingAnotherCaRefusesTheServer) {
  SecureCluster cluster(ServerTls(false, false));
  ASSERT_TRUE(cluster.Start());
  grpc::Status s =
      GetView(SecureCluster::Channel(cluster.coordinator_address(), ClientTls(env->pki->other_ca)));
  ASSERT_TRUE(RefusedInHandshake(s));
  EXPECT_NE(Lower(s.error_message()).find("ssl"), std::string::npos) << s.error_message();
}

TEST(Tls, TheServerNameIsChecked) {
  SecureCluster cluster(ServerTls(false, false));
  ASSERT_TRUE(cluster.Start());
  TransportSecurityOptions wrong_name = ClientTls(env->pki->ca);
  wrong_name.tls_server_name = "ps.elsewhere.example";
  EXPECT_TRUE(RefusedInHandshake(
      GetView(SecureCluster::Channel(cluster.coordinator_address(), wrong_name))));
  TransportSecurityOptions right_name = ClientTls(env->pki->ca);
  right_name.tls_server_name = "localhost";  // in the certificate's SANs
  EXPECT_TRUE(GetView(SecureCluster::Channel(cluster.coordinator_address(), right_name)).ok());
}

// A Join whose own TLS handshake refuses the coordinator (a certificate
// from another CA, another name, no TLS there at all) was retried for the
// whole coordinator_outage_ms, 5 minutes by default, and then reported as
// unreachable with "is the address right?". No retry changes it: Join ends
// at once as UNAUTHENTICATED, naming the setting to check. The outage
// budget here is 60 s, so a retrying Join reports UNAVAILABLE.
Status JoinThrough(const std::string& coordinator, TransportSecurityOptions security) {
  WorkerOptions o;
  o.coordinator = coordinator;
  o.codec = PushCodec::kFp32;
  o.coordinator_outage_ms = 60000;
  o.security = std::move(security);
  auto w = Worker::Connect(o);
  if (!w.ok()) return w.status();
  return (*w)->Join(2 * kShardAlign);
}

TEST(TlsRefusal, AJoinThatDistrustsTheCoordinatorsCertificateEndsAtOnce) {
  SecureCluster cluster(ServerTls(false, false));
  ASSERT_TRUE(cluster.Start());
  const Status s = JoinThrough(cluster.coordinator_address(), ClientTls(env->pki->other_ca));
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << s.ToString();
  EXPECT_TRUE(
      Says(s.message(), {"Join at " + cluster.coordinator_address(), "certificate verify failed",
                         "not signed by a CA in --tls-ca (tls_ca)"}));
}

TEST(TlsRefusal, AJoinToAHostTheCertificateDoesNotNameEndsAtOnce) {
  SecureCluster cluster(ServerTls(false, false));
  ASSERT_TRUE(cluster.Start());
  TransportSecurityOptions wrong_name = ClientTls(env->pki->ca);
  wrong_name.tls_server_name = "ps.elsewhere.example";
  const Status s = JoinThrough(cluster.coordinator_address(), wrong_name);
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << s.ToString();
  EXPECT_TRUE(
      Says(s.message(), {"ps.elsewhere.example", "set --tls-server-name (tls_server_name)"}));
}

TEST(TlsRefusal, ATlsJoinToAPlaintextCoordinatorEndsAtOnce) {
  SecureCluster cluster(TransportSecurityOptions::Insecure());
  ASSERT_TRUE(cluster.Start());
  const Status s = JoinThrough(cluster.coordinator_address(), ClientTls(env->pki->ca));
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << s.ToString();
  EXPECT_TRUE(Says(s.message(), {"the peer does not (it runs with --insecure)"}));
}

// A plaintext Join to a TLS coordinator sees the socket closed, as while
// the coordinator restarts, and was retried for the whole outage budget. A
// probe of the coordinator's TLS tells the two apart: the Join ends at
// once, naming the flag to give.
TEST(TlsRefusal, APlaintextJoinToATlsCoordinatorEndsAtOnce) {
  SecureCluster cluster(ServerTls(false, false));
  ASSERT_TRUE(cluster.Start());
  const auto started = std::chrono::steady_clock::now();
  const Status s = JoinThrough(cluster.coordinator_address(), TransportSecurityOptions::Insecure());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << s.ToString();
  EXPECT_TRUE(Says(s.message(), {"Join at " + cluster.coordinator_address(), "Socket closed",
                                 "speaks TLS, and this process connects in plaintext (--insecure",
                                 "give --tls-ca (tls_ca)"}));
  EXPECT_LT(seconds, 20.0) << "the outage budget is 60 s";
}

// What the first call to the shard (InitParameters) of a worker with
// `options` answers, once it has joined through the coordinator (a test
// failure, and INTERNAL, if it could not).
Status FirstShardCall(const WorkerOptions& options) {
  auto w = Worker::Connect(options);
  constexpr size_t n = 2 * kShardAlign;
  const Status joined = w.ok() ? (*w)->Join(n) : w.status();
  if (!joined.ok()) {
    ADD_FAILURE() << "the worker did not join: " << joined.ToString();
    return Internal("not joined");
  }
  std::vector<float> initial(n, 0.5f), params;
  return (*w)->InitParameters(initial, &params);
}

// A shard whose certificate the worker does not trust: the worker joins
// (it trusts the coordinator) and its first call to the shard ends with
// the hint, instead of retrying until its retry budget runs out.
TEST(TlsRefusal, AShardWhoseCertificateTheWorkerDistrustsFailsItsFirstCall) {
  TransportSecurityOptions shard = ServerTls(false, false);
  shard.tls_cert = env->pki->other_server_cert;
  shard.tls_key = env->pki->other_server_key;
  SecureCluster cluster(shard);
  cluster.SetCoordinatorSecurity(ServerTls(false, false));
  ASSERT_TRUE(cluster.Start());
  WorkerOptions o = cluster.WorkerFor(ClientTls(env->pki->ca));
  o.retry_budget_ms = 60000;
  o.max_retries = 1000;
  const Status s = FirstShardCall(o);
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << s.ToString();
  EXPECT_TRUE(Says(s.message(), {"not signed by a CA in --tls-ca (tls_ca)"}));
  EXPECT_EQ(cluster.server().service().Snapshot().version(), 0u);
}

// A shard under --tls-client-auth refuses a worker without a client
// certificate by closing the socket, which a restarting shard does too. The
// probe shows the shard asking for a certificate this worker does not
// have: its first call ends, naming the flags.
TEST(TlsRefusal, AShardThatRequiresAClientCertificateRefusesAWorkerWithoutOneAtOnce) {
  SecureCluster cluster(ServerTls(/*client_auth=*/true, false));
  cluster.SetCoordinatorSecurity(ServerTls(false, false));
  ASSERT_TRUE(cluster.Start());
  WorkerOptions o = cluster.WorkerFor(ClientTls(env->pki->ca));
  o.retry_budget_ms = 60000;
  o.max_retries = 1000;
  const Status s = FirstShardCall(o);
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << s.ToString();
  EXPECT_TRUE(Says(s.message(), {"Socket closed", "requires a client certificate",
                                 "give --tls-cert and --tls-key (tls_cert, tls_key)"}));
  EXPECT_EQ(cluster.server().service().Snapshot().version(), 0u);
}

// A worker that does present a certificate, one the shard does not trust:
// the shard closes the socket, as a restarting one does. The probe presents
// the same certificate, twice, and the shard closes both connections right
// after their handshakes, so the first refusal is final, where the call was
// retried for retry_budget_ms.
TEST(TlsRefusal, AShardThatRefusesTheWorkersCertificateRefusesItAtOnce) {
  SecureCluster cluster(ServerTls(/*client_auth=*/true, false));
  cluster.SetCoordinatorSecurity(ServerTls(false, false));
  ASSERT_TRUE(cluster.Start());
  const auto& p = *env->pki;
  WorkerOptions o = cluster.WorkerFor(ClientTls(p.ca, p.other_client_cert, p.other_client_key));
  o.retry_budget_ms = 60000;
  o.max_retries = 1000;
  const auto started = std::chrono::steady_clock::now();
  const Status s = FirstShardCall(o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << s.ToString();
  EXPECT_TRUE(Says(s.message(),
                   {"Socket closed", "refuses this process's certificate", "(--tls-cert, tls_cert)",
                    "closing two connections", "signed by a CA in the peer's --tls-ca"}));
  EXPECT_LT(seconds, 20.0) << "the retry budget is 60 s";
  EXPECT_EQ(cluster.server().service().Snapshot().version(), 0u);
}

// A plaintext server (--insecure) registering with a TLS coordinator: the
// probe shows the coordinator's TLS, and the first refusal is final, where
// the registration was retried for --register-timeout-s.
TEST(TlsRefusal, APlaintextServerGivesUpAtOnceAgainstATlsCoordinator) {
  SecureCluster cluster(TransportSecurityOptions::Insecure());
  cluster.SetCoordinatorSecurity(ServerTls(false, false));
  ASSERT_FALSE(cluster.Start());
  const Status fatal = cluster.server().fatal_status();
  EXPECT_EQ(fatal.code(), StatusCode::kUnauthenticated) << fatal.ToString();
  EXPECT_TRUE(Says(fatal.message(), {"speaks TLS, and this process connects in plaintext"}));
  EXPECT_FALSE(cluster.server().registered());
}

// The server's own registration: its --tls-ca does not hold the CA of the
// coordinator's certificate. It ended only after --register-timeout-s
// (2 minutes); now the first attempt is final.
TEST(TlsRefusal, AServerThatDistrustsTheCoordinatorGivesUpAtOnce) {
  TransportSecurityOptions server = ServerTls(false, false);
  server.tls_ca = env->pki->other_ca;
  SecureCluster cluster(server);
  cluster.SetCoordinatorSecurity(ServerTls(false, false));
  ASSERT_FALSE(cluster.Start());
  const Status fatal = cluster.server().fatal_status();
  EXPECT_EQ(fatal.code(), StatusCode::kUnauthenticated) << fatal.ToString();
  EXPECT_TRUE(Says(fatal.message(), {"certificate verify failed", "--tls-ca (tls_ca)"}));
  EXPECT_FALSE(cluster.server().registered());
}

// The server's own registration under a coordinator with
// --tls-client-auth: the server presents a certificate from another CA.
// The coordinator closes the connection, the probe presenting the same
// certificate sees it closed twice, and the first attempt is final.
TEST(TlsRefusal, AServerWhoseCertificateTheCoordinatorRefusesGivesUpAtOnce) {
  TransportSecurityOptions server = ServerTls(false, false);
  server.tls_cert = env->pki->other_server_cert;
  server.tls_key = env->pki->other_server_key;
  SecureCluster cluster(server);
  cluster.SetCoordinatorSecurity(ServerTls(/*client_auth=*/true, false));
  ASSERT_FALSE(cluster.Start());
  const Status fatal = cluster.server().fatal_status();
  EXPECT_EQ(fatal.code(), StatusCode::kUnauthenticated) << fatal.ToString();
  EXPECT_TRUE(Says(fatal.message(), {"refuses this process's certificate", "--tls-ca"}));
  EXPECT_FALSE(cluster.server().registered());
}

TEST(MutualTls, OnlyAClientCertificateFromTheCaIsAccepted) {
  SecureCluster cluster(ServerTls(/*client_auth=*/true, false));
  // The server's own channel to the coordinator presents its certificate:
  // registration succeeding is the first accepted client certificate.
  ASSERT_TRUE(cluster.Start());
  const std::string addr = cluster.coordinator_address();
  const auto& p = *env->pki;
  EXPECT_TRUE(RefusedInHandshake(GetView(SecureCluster::Channel(addr, ClientTls(p.ca)))))
      << "no client certificate";
  EXPECT_TRUE(RefusedInHandshake(GetView(
      SecureCluster::Channel(addr, ClientTls(p.ca, p.other_client_cert, p.other_client_key)))))
      << "a certificate from another CA";
  EXPECT_TRUE(
      GetView(SecureCluster::Channel(addr, ClientTls(p.ca, p.client_cert, p.client_key))).ok());
  // The parameter server's port demands the same.
  EXPECT_TRUE(RefusedInHandshake(
      GetView(SecureCluster::Channel(cluster.server_address(), ClientTls(p.ca)))));
}

// Raw calls to the shard as a worker would make them.
struct ShardClient {
  std::unique_ptr<v1::Coordinator::Stub> coordinator;
  std::unique_ptr<v1::ParameterServer::Stub> server;
  ShardClient(SecureCluster& c, const TransportSecurityOptions& o)
      : coordinator(v1::Coordinator::NewStub(
            SecureCluster::Channel(c.coordinator_address(), o))),
        server(v1::ParameterServer::NewStub(SecureCluster::Channel(c.server_address(), o))) {}
};

v1::Payload Fp32(uint64_t offset, const std::vector<float>& values) {
  v1::Payload p;
  p.set_codec(v1::CODEC_FP32);
  p.set_offset(offset);
  p.set_length(values.size());
  p.set_data(std::string(reinterpret_cast<const char*>(values.data()),
                         values.size() * sizeof(float)));
  return p;
}

struct ShardState {
  uint64_t version;
  std::vector<float> params, m, v;
  bool operator==(const ShardState&) const = default;
};
ShardState Capture(ParameterServer& s) {
  ShardStore store = s.service().Snapshot();
  return {store.version(), store.params(), store.m(), store.v()};
}

TEST(BearerToken, RefusedCallsAreUnauthenticatedCountedAndChangeNothing) {
  SecureCluster cluster(ServerTls(false, /*token=*/true));
  ASSERT_TRUE(cluster.Start());  // the server's own calls carry the token
  const auto& p = *env->pki;
  ShardClient good(cluster, ClientTls(p.ca, "", "", env->token));
  ShardClient missing(cluster, ClientTls(p.ca));
  ShardClient wrong(cluster, ClientTls(p.ca, "", "", env->wrong_token));

  // The coordinator: one missing, two wrong, then the right token.
  EXPECT_EQ(GetView(SecureCluster::Channel(cluster.coordinator_address(), ClientTls(p.ca)))
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    v1::JoinRequest req;
    req.set_total_elements(kShardAlign);
    v1::JoinResponse resp;
    EXPECT_EQ(wrong.coordinator->Join(&ctx, req, &resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  v1::JoinResponse joined;
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    v1::JoinRequest req;
    req.set_name("token-test");
    req.set_total_elements(kShardAlign);
    grpc::Status s = good.coordinator->Join(&ctx, req, &joined);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  // The refused joins did not join anybody: one member, the good one.
  EXPECT_EQ(joined.world_size(), 1u);
  const int cport = cluster.coordinator().metrics_port();
  EXPECT_EQ(ScrapeRejections(cport, "missing_token"), 1);
  EXPECT_EQ(ScrapeRejections(cport, "bad_token"), 2);
  EXPECT_EQ(ScrapeRejections(cport, "malformed_token"), 0);

  // The shard: initialise it, then push the same valid gradient without and
  // with a wrong token (refused, state byte-identical), then with the right
  // one (accepted: the push was valid, only its credentials were not).
  const uint64_t id = joined.worker_id();
  std::vector<float> init(kShardAlign, 0.25f), grad(kShardAlign, 0.5f);
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    v1::InitShardRequest req;
    req.set_worker_id(id);
    req.set_shard_id(0);
    *req.mutable_params() = Fp32(0, init);
    v1::InitShardResponse resp;
    grpc::Status s = good.server->InitShard(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  v1::PushRequest push;
  push.set_worker_id(id);
  push.set_shard_id(0);
  push.set_step(0);
  *push.mutable_gradient() = Fp32(0, grad);
  const ShardState before = Capture(cluster.server());
  for (ShardClient* c : {&missing, &wrong, &wrong}) {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    v1::PushResponse resp;
    EXPECT_EQ(c->server->Push(&ctx, push, &resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_TRUE(Capture(cluster.server()) == before) << "a refused push changed the shard";
  const int sport = cluster.server().metrics_port();
  EXPECT_EQ(ScrapeRejections(sport, "missing_token"), 1);
  EXPECT_EQ(ScrapeRejections(sport, "bad_token"), 2);
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    v1::PushResponse resp;
    grpc::Status s = good.server->Push(&ctx, push, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  // The good push completes step 0 (the only participant): version 1.
  bool applied = false;
  for (int i = 0; i < 500 && !applied; ++i) {  // bounded: 500 x 10 ms
    applied = Capture(cluster.server()).version == 1;
    if (!applied) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(applied) << "the accepted push did not complete the step";
  EXPECT_EQ(cluster.server().auth_rejections().Count(AuthRejectReason::kBadToken), 2);
}

TEST(BearerToken, WorksOverPlaintextWhenAskedFor) {
  TransportSecurityOptions server = TransportSecurityOptions::Insecure();
  server.auth_token_file = env->token;
  SecureCluster cluster(server);
  ASSERT_TRUE(cluster.Start());
  TransportSecurityOptions no_token = TransportSecurityOptions::Insecure();
  EXPECT_EQ(GetView(SecureCluster::Channel(cluster.coordinator_address(), no_token)).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  TransportSecurityOptions with_token = no_token;
  with_token.auth_token_file = env->token;
  EXPECT_TRUE(GetView(SecureCluster::Channel(cluster.coordinator_address(), with_token)).ok());
  EXPECT_EQ(ScrapeRejections(cluster.coordinator().metrics_port(), "missing_token"), 1);
}

HealthCheckResponse::ServingStatus CheckHealth(int port, const std::string& service,
                                               grpc::StatusCode* code) {
  auto stub = Health::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  HealthCheckRequest req;
  req.set_service(service);
  HealthCheckResponse resp;
  *code = stub->Check(&ctx, req, &resp).error_code();
  return resp.status();
}

TEST(HealthPort, AnswersInPlaintextWithoutTokenWhileTheMainPortNeedsTls) {
  SecureCluster cluster(ServerTls(/*client_auth=*/true, /*token=*/true));
  ASSERT_TRUE(cluster.Start());
  struct Target {
    int health_port;
    std::string main_address, service;
  };
  for (const Target& t :
       {Target{cluster.coordinator().health_port(), cluster.coordinator_address(),
               "loco.v1.Coordinator"},
        Target{cluster.server().health_port(), cluster.server_address(),
               "loco.v1.ParameterServer"}}) {
    ASSERT_GT(t.health_port, 0);
    for (const std::string& service : {std::string(), t.service}) {
      grpc::StatusCode code;
      EXPECT_EQ(CheckHealth(t.health_port, service, &code), HealthCheckResponse::SERVING)
          << t.service;
      EXPECT_EQ(code, grpc::StatusCode::OK);
    }
    // The health port serves nothing else.
    EXPECT_EQ(GetView(grpc::CreateChannel("127.0.0.1:" + std::to_string(t.health_port),
                                          grpc::InsecureChannelCredentials()))
                  .error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
    // And the main port still refuses plaintext.
    EXPECT_TRUE(RefusedInHandshake(GetView(
        SecureCluster::Channel(t.main_address, TransportSecurityOptions::Insecure()))));
  }
}

}  // namespace
}  // namespace loco::test

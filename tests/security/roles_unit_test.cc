// The role and ticket logic without gRPC: which credentials grant which
// role (security/caller_role.h) and worker tickets (security/worker_ticket.h).
#include <gtest/gtest.h>

#include "security/caller_role.h"
#include "security/worker_ticket.h"

namespace loco {
namespace {

RolePolicy Tokens() {
  RolePolicy::Config c;
  c.worker_token = "worker-secret";
  c.server_token = "server-secret";
  auto p = RolePolicy::Make(c);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(p).value();
}

TEST(RolePolicy, EachRoleTokenGrantsItsRoleOnly) {
  const RolePolicy policy = Tokens();
  EXPECT_TRUE(policy.separated());
  const CallerIdentity worker = policy.Resolve("worker-secret", {});
  EXPECT_TRUE(worker.worker);
  EXPECT_FALSE(worker.server);
  const CallerIdentity server = policy.Resolve("server-secret", {});
  EXPECT_FALSE(server.worker);
  EXPECT_TRUE(server.server);
  EXPECT_EQ(server.server_identity, "server-token");
  for (const auto& nothing : {policy.Resolve(std::nullopt, {}), policy.Resolve("guess", {}),
                              policy.Resolve("server-secre", {})}) {
    EXPECT_FALSE(nothing.worker);
    EXPECT_FALSE(nothing.server);
  }
}

TEST(RolePolicy, ASharedTokenOrNoneGrantsBothRolesAsBefore) {
  RolePolicy::Config shared;
  shared.shared_token = "shared";
  for (const RolePolicy::Config& c : {shared, RolePolicy::Config()}) {
    auto policy = RolePolicy::Make(c);
    ASSERT_TRUE(policy.ok());
    EXPECT_FALSE(policy->separated());
    const CallerIdentity any = policy->Resolve(std::nullopt, {});
    EXPECT_TRUE(any.worker && any.server);
    EXPECT_TRUE(any.server_identity.empty()) << "unbound: anybody may re-register, as before";
  }
}

TEST(RolePolicy, ContradictoryTokenSettingsAreRefusedWithWhatWouldBeRight) {
  RolePolicy::Config mixed;
  mixed.shared_token = "shared";
  mixed.worker_token = "w";
  mixed.server_token = "s";
  EXPECT_NE(RolePolicy::Make(mixed).status().message().find("only the two role tokens"),
            std::string::npos);
  RolePolicy::Config half;
  half.worker_token = "w";
  EXPECT_NE(RolePolicy::Make(half).status().message().find("without --server-token-file"),
            std::string::npos);
  RolePolicy::Config same;
  same.worker_token = same.server_token = "same";
  EXPECT_NE(RolePolicy::Make(same).status().message().find("same token"), std::string::npos);
}

TEST(RolePolicy, CertificateNamesGrantRolesAndRestrictTheShard) {
  RolePolicy::Config c;
  c.certificate_roles = true;
  auto made = RolePolicy::Make(c);
  ASSERT_TRUE(made.ok());
  const RolePolicy& policy = *made;
  EXPECT_TRUE(policy.separated());

  const CallerIdentity worker = policy.Resolve(std::nullopt, {"loco-worker.pod-7", "localhost"});
  EXPECT_TRUE(worker.worker);
  EXPECT_FALSE(worker.server);

  const CallerIdentity shard1 = policy.Resolve(std::nullopt, {"localhost", "loco-server.shard-1"});
  EXPECT_TRUE(shard1.server);
  EXPECT_FALSE(shard1.worker);
  ASSERT_TRUE(shard1.server_shard.has_value());
  EXPECT_EQ(*shard1.server_shard, 1u);
  EXPECT_TRUE(AuthorizeShardCall(shard1, 1, "RegisterServer").ok());
  const Status other = AuthorizeShardCall(shard1, 0, "RegisterServer");
  EXPECT_EQ(other.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(other.message().find("names shard 1 only"), std::string::npos) << other.message();
  EXPECT_EQ(shard1.server_identity, "certificate:localhost,loco-server.shard-1");

  const CallerIdentity any_shard = policy.Resolve(std::nullopt, {"loco-server"});
  EXPECT_TRUE(any_shard.server);
  EXPECT_FALSE(any_shard.server_shard.has_value());

  // Names that merely resemble a role grant nothing.
  for (const char* name : {"loco-workers", "loco-worker.", "xloco-server", "loco-server.shard-",
                           "loco-server.shard-1x", "loco-test-client"}) {
    const CallerIdentity none = policy.Resolve(std::nullopt, {name});
    EXPECT_FALSE(none.worker || none.server) << name;
  }
}

TEST(RolePolicy, TokensAndCertificatesTogetherGrantOnlyWhatBothGrant) {
  RolePolicy::Config c;
  c.worker_token = "worker-secret";
  c.server_token = "server-secret";
  c.certificate_roles = true;
  auto policy = RolePolicy::Make(c);
  ASSERT_TRUE(policy.ok());
  const CallerIdentity server_cert_worker_token =
      policy->Resolve("worker-secret", {"loco-server"});
  EXPECT_FALSE(server_cert_worker_token.worker);
  EXPECT_FALSE(server_cert_worker_token.server);
  EXPECT_TRUE(policy->Resolve("worker-secret", {"loco-worker"}).worker);
}

TEST(AuthorizeRole, RefusalsArePermissionDeniedAndSayWhatToGive) {
  CallerIdentity worker;
  worker.worker = true;
  EXPECT_TRUE(AuthorizeRole(worker, CallerRole::kWorker, "Join").ok());
  const Status s = AuthorizeRole(worker, CallerRole::kServer, "RegisterServer");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("RegisterServer is for the server role"), std::string::npos);
  EXPECT_NE(s.message().find("--server-token-file"), std::string::npos);
  EXPECT_EQ(AuthorizeShardCall(worker, 0, "RegisterServer").code(), StatusCode::kPermissionDenied);
}

TEST(WorkerTicket, AKeyVerifiesItsOwnTicketsOnly) {
  auto key = WorkerTicketKey::FromBytes(std::string(32, 'k'));
  auto other = WorkerTicketKey::FromBytes(std::string(32, 'o'));
  ASSERT_TRUE(key.ok() && other.ok());
  const std::string t1 = key->Issue(1);
  EXPECT_EQ(t1.size(), WorkerTicketKey::kTicketChars);
  EXPECT_EQ(t1, key->Issue(1)) << "deterministic: nothing stored, recomputed to check";
  EXPECT_TRUE(key->Verify(1, t1));
  EXPECT_FALSE(key->Verify(2, t1)) << "worker 1's ticket does not act for worker 2";
  EXPECT_FALSE(other->Verify(1, t1)) << "another key (a restart without a key file)";
  EXPECT_FALSE(key->Verify(1, ""));
  EXPECT_FALSE(key->Verify(1, t1.substr(0, t1.size() - 1)));
  // Key "k" x 32, as `printf MESSAGE | openssl dgst -sha256 -hmac kkk...` says:
  // the key id is the first 8 bytes of the mac of
  // "loco-worker-ticket-key-id/v2", the rest the mac of "loco-worker-ticket/v2:1".
  EXPECT_EQ(t1,
            "18c4645980b9bc31."
            "c1bee20c3d8cacc10c6a413bc91eafd5f56b378645d1b8697a5840b106e26082");
  EXPECT_EQ(key->id(), "18c4645980b9bc31");
  EXPECT_EQ(WorkerTicketKey::KeyIdOf(t1), key->id());
  EXPECT_EQ(WorkerTicketKey::KeyIdOf(other->Issue(1)), other->id());
  EXPECT_NE(other->id(), key->id());
  EXPECT_EQ(WorkerTicketKey::KeyIdOf(t1.substr(1)), "") << "not shaped like a ticket";
  EXPECT_EQ(WorkerTicketKey::KeyIdOf(std::string(WorkerTicketKey::kTicketChars, 'a')), "");
  auto a = WorkerTicketKey::Random();
  auto b = WorkerTicketKey::Random();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->Issue(5), b->Issue(5)) << "random keys differ";
}

TEST(WorkerTicket, KeyFilesAreCheckedWithWhatIsExpected) {
  const std::string dir = ::testing::TempDir();
  auto write = [&](const std::string& name, const std::string& content) {
    const std::string path = dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(content.data(), 1, content.size(), f);
    std::fclose(f);
    return path;
  };
  const std::string good = write("ticket-key-good", std::string(64, 'a') + "\n");
  auto k1 = WorkerTicketKey::FromFile(good);
  auto k2 = WorkerTicketKey::FromFile(good);
  ASSERT_TRUE(k1.ok() && k2.ok()) << k1.status().ToString();
  EXPECT_TRUE(k2->Verify(9, k1->Issue(9))) << "the same file: tickets survive a restart";
  const Status shortkey = WorkerTicketKey::FromFile(write("ticket-key-short", "abc\n")).status();
  EXPECT_NE(shortkey.message().find("--ticket-key-file"), std::string::npos);
  EXPECT_NE(shortkey.message().find("openssl rand"), std::string::npos) << shortkey.message();
  // A raw 32-byte key whose last byte is a line break is one byte short: the
  // message says why, since the file itself holds 32 bytes.
  const Status raw =
      WorkerTicketKey::FromFile(write("ticket-key-raw", std::string(31, '\x9c') + "\n")).status();
  EXPECT_NE(raw.message().find("holds 31 bytes after dropping 1 trailing line-break byte(s)"),
            std::string::npos)
      << raw.message();
  EXPECT_NE(WorkerTicketKey::FromFile(dir + "/no-such-key").status().message().find(
                "cannot be opened"),
            std::string::npos);
}

}  // namespace
}  // namespace loco

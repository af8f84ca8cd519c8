// TransportSecurityOptions: flags, environment variables, every refused
// combination with a message that says what would be right, and the token
// file format.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "common/flags.h"
#include "common/transport_security_options.h"
#include "security/bearer_token.h"
#include "security/transport_security.h"
#include "tests/common/map_environment.h"

namespace loco {
namespace {

// A folder with a readable PEM-looking file and a token file; removed after.
class OptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/loco-secopt.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    pem_ = Write("x.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    token_ = Write("token", "s3cret-token\n");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(content.data(), 1, content.size(), f);
    std::fclose(f);
    return path;
  }
  // Parses `args` (and `env`) as the flags of `role`.
  Status Parse(TransportRole role, const std::vector<std::string>& args,
               TransportSecurityOptions* out, const std::map<std::string, std::string>& env = {}) {
    FlagSet flags("test");
    AddTransportSecurityFlags(flags, role, out);
    bool help = false;
    return flags.Parse(args, MapEnvironment(env), &help);
  }
  std::string dir_, pem_, token_;
};

// The message of a refused combination must name `needle`.
::testing::AssertionResult RefusedNaming(const Status& s, const std::string& needle) {
  if (s.ok()) return ::testing::AssertionFailure() << "accepted; expected a refusal";
  if (s.code() != StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << "code " << s.ToString();
  }
  if (s.message().find(needle) == std::string::npos) {
    return ::testing::AssertionFailure() << "'" << s.message() << "' does not name '" << needle
                                         << "'";
  }
  return ::testing::AssertionSuccess();
}

TEST_F(OptionsTest, FlagsAndEnvironmentFillTheOptions) {
  TransportSecurityOptions o;
  ASSERT_TRUE(Parse(TransportRole::kServerAndClient,
                    {"--tls-cert=" + pem_, "--tls-key", pem_, "--tls-client-auth",
                     "--tls-server-name=ps.example"},
                    &o, {{"LOCO_TLS_CA", pem_}, {"LOCO_AUTH_TOKEN_FILE", token_}})
                  .ok());
  EXPECT_EQ(o.tls_cert, pem_);
  EXPECT_EQ(o.tls_key, pem_);
  EXPECT_EQ(o.tls_ca, pem_);
  EXPECT_TRUE(o.tls_client_auth);
  EXPECT_EQ(o.tls_server_name, "ps.example");
  EXPECT_EQ(o.auth_token_file, token_);
  EXPECT_FALSE(o.insecure);
  EXPECT_TRUE(ValidateTransportSecurityOptions(o, TransportRole::kServerAndClient).ok());

  TransportSecurityOptions p;
  ASSERT_TRUE(Parse(TransportRole::kClient, {}, &p, {{"LOCO_INSECURE", "true"}}).ok());
  EXPECT_TRUE(p.insecure);
}

TEST_F(OptionsTest, RoleDecidesWhichFlagsExist) {
  TransportSecurityOptions o;
  EXPECT_FALSE(Parse(TransportRole::kClient, {"--tls-client-auth"}, &o).ok());
  EXPECT_FALSE(Parse(TransportRole::kServer, {"--tls-server-name=x"}, &o).ok());
  EXPECT_FALSE(Parse(TransportRole::kServer, {"--health-port=1"}, &o).ok());
}

TEST_F(OptionsTest, NeitherTlsNorInsecureIsRefusedSayingWhatToPass) {
  const TransportSecurityOptions none;
  for (TransportRole role :
       {TransportRole::kServer, TransportRole::kClient, TransportRole::kServerAndClient}) {
    Status s = ValidateTransportSecurityOptions(none, role);
    EXPECT_TRUE(RefusedNaming(s, "--insecure"));
    EXPECT_TRUE(RefusedNaming(s, role == TransportRole::kClient ? "--tls-ca" : "--tls-cert"));
  }
  EXPECT_TRUE(ValidateTransportSecurityOptions(TransportSecurityOptions::Insecure(),
                                               TransportRole::kServer)
                  .ok());
}

TEST_F(OptionsTest, EveryContradictionIsRefused) {
  TransportSecurityOptions o;
  o.tls_cert = pem_;  // no key
  EXPECT_TRUE(RefusedNaming(ValidateTransportSecurityOptions(o, TransportRole::kServer),
                            "--tls-key"));
  o = {};
  o.tls_key = pem_;  // no cert
  EXPECT_TRUE(RefusedNaming(ValidateTransportSecurityOptions(o, TransportRole::kClient),
                            "--tls-cert"));
  o = {};
  o.tls_cert = o.tls_key = pem_;
  o.tls_client_auth = true;  // without a CA
  EXPECT_TRUE(RefusedNaming(ValidateTransportSecurityOptions(o, TransportRole::kServer),
                            "--tls-ca"));
  o = {};
  o.insecure = true;
  o.tls_ca = pem_;  // plaintext and TLS at once
  EXPECT_TRUE(RefusedNaming(ValidateTransportSecurityOptions(o, TransportRole::kClient),
                            "--insecure"));
  o = {};
  o.tls_ca = pem_;  // a server cannot serve TLS with a CA only
  EXPECT_TRUE(RefusedNaming(ValidateTransportSecurityOptions(o, TransportRole::kServer),
                            "--tls-cert"));
  EXPECT_TRUE(ValidateTransportSecurityOptions(o, TransportRole::kClient).ok());
  o = {};
  o.auth_token_file = token_;  // a token alone is neither TLS nor plaintext
  EXPECT_TRUE(RefusedNaming(ValidateTransportSecurityOptions(o, TransportRole::kClient),
                            "--insecure"));
  o.insecure = true;  // allowed, with a warning at startup
  EXPECT_TRUE(ValidateTransportSecurityOptions(o, TransportRole::kClient).ok());
}

TEST_F(OptionsTest, MissingAndUnreadableFilesAreNamed) {
  TransportSecurityOptions o;
  o.tls_cert = dir_ + "/nope.pem";
  o.tls_key = pem_;
  EXPECT_TRUE(RefusedNaming(ValidateTransportSecurityOptions(o, TransportRole::kServer),
                            "nope.pem"));
  o.tls_cert = dir_;  // a folder
  EXPECT_TRUE(RefusedNaming(ValidateTransportSecurityOptions(o, TransportRole::kServer),
                            "not a regular file"));
  o = TransportSecurityOptions::Insecure();
  o.auth_token_file = dir_ + "/no-token";
  EXPECT_TRUE(RefusedNaming(ValidateTransportSecurityOptions(o, TransportRole::kServer),
                            "no-token"));
  // A file that is not PEM is found when it is read.
  o = {};
  o.tls_ca = token_;
  auto loaded = TransportSecurity::Load(o, TransportRole::kClient);
  EXPECT_TRUE(RefusedNaming(loaded.status(), "PEM"));
}

// The header a client sends and the token a server reads back from it are
// one round trip; anything but "Bearer " and a non-empty token is no token.
TEST(BearerHeader, CarriesTheTokenAndNothingElseReadsAsOne) {
  EXPECT_EQ(BearerHeaderValue("s3cret"), "Bearer s3cret");
  EXPECT_EQ(TokenOfBearerHeader(BearerHeaderValue("s3cret")), "s3cret");
  EXPECT_EQ(TokenOfBearerHeader("Bearer a b"), "a b");  // the server compares it whole
  for (const char* refused : {"", "Bearer", "Bearer ", "bearer s3cret", "Basic s3cret",
                              " Bearer s3cret", "Bearers3cret"}) {
    EXPECT_EQ(TokenOfBearerHeader(refused), std::nullopt) << "'" << refused << "'";
  }
}

TEST_F(OptionsTest, TokenFileIsTrimmedAndChecked) {
  auto t = ReadBearerToken(token_);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, "s3cret-token");
  auto crlf = ReadBearerToken(Write("crlf", "abc\r\n\n"));
  ASSERT_TRUE(crlf.ok());
  EXPECT_EQ(*crlf, "abc");
  EXPECT_TRUE(RefusedNaming(ReadBearerToken(Write("empty", "")).status(), "empty"));
  EXPECT_TRUE(RefusedNaming(ReadBearerToken(Write("newline", "\n")).status(), "empty"));
  EXPECT_TRUE(RefusedNaming(ReadBearerToken(Write("space", "a b\n")).status(), "0x20"));
  EXPECT_TRUE(
      RefusedNaming(ReadBearerToken(Write("long", std::string(5000, 'a'))).status(), "4096"));
  // Through Load, so the binaries refuse an empty token file at startup.
  TransportSecurityOptions o = TransportSecurityOptions::Insecure();
  o.auth_token_file = dir_ + "/empty";
  EXPECT_TRUE(RefusedNaming(TransportSecurity::Load(o, TransportRole::kServer).status(), "empty"));
}

TEST(ConstantTimeEquals, AgreesWithOrdinaryEquality) {
  const std::vector<std::string> v = {"", "a", "b", "ab", "abc", "abd", "abcd", "xbc"};
  for (const auto& a : v) {
    for (const auto& b : v) EXPECT_EQ(ConstantTimeEquals(a, b), a == b) << a << " vs " << b;
  }
}

TEST(TransportSecurityArgs, ForwardOnlyWhatTheRoleTakes) {
  TransportSecurityOptions o;
  o.tls_cert = "c";
  o.tls_key = "k";
  o.tls_ca = "ca";
  o.tls_client_auth = true;
  o.tls_server_name = "n";
  o.auth_token_file = "t";
  using V = std::vector<std::string>;
  EXPECT_EQ(TransportSecurityArgs(o, TransportRole::kServer),
            (V{"--tls-cert=c", "--tls-key=k", "--tls-ca=ca", "--tls-client-auth",
               "--auth-token-file=t"}));
  EXPECT_EQ(TransportSecurityArgs(o, TransportRole::kClient),
            (V{"--tls-cert=c", "--tls-key=k", "--tls-ca=ca", "--tls-server-name=n",
               "--auth-token-file=t"}));
  EXPECT_EQ(TransportSecurityArgs(TransportSecurityOptions::Insecure(), TransportRole::kClient),
            (V{"--insecure"}));
}

}  // namespace
}  // namespace loco

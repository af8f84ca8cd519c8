// PeerTlsProbe: the address in gRPC's messages, and one TLS handshake
// against real gRPC servers on loopback (a plaintext coordinator, a TLS one,
// one under --tls-client-auth, and a closed port), with and without a
// certificate of the probe's own.
#include "security/peer_tls_probe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/host_port.h"
#include "tests/common/loopback_listener.h"
#include "tests/security/secure_cluster.h"
#include "tests/security/test_pki.h"

namespace loco::test {
namespace {

constexpr std::chrono::milliseconds kTimeout{2000};

TEST(PeerAddressIn, ReadsTheAddressGrpcNames) {
  const auto v4 = PeerAddressIn(
      "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:17711: "
      "Socket closed");
  ASSERT_TRUE(v4.has_value());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 17711);
  EXPECT_EQ(JoinHostPort(v4->host, v4->port), "127.0.0.1:17711");
  const auto v6 = PeerAddressIn("last error: UNAVAILABLE: ipv6:[::1]:7000: Socket closed");
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 7000);
  EXPECT_EQ(JoinHostPort(v6->host, v6->port), "[::1]:7000");
}

TEST(PeerAddressIn, FindsNoneWhereNoneIsNamed) {
  EXPECT_FALSE(PeerAddressIn("DNS resolution failed for nosuchhost.invalid:1").has_value());
  EXPECT_FALSE(PeerAddressIn("Socket closed").has_value());
  EXPECT_FALSE(PeerAddressIn("ipv4:127.0.0.1:notaport: x").has_value());
  EXPECT_FALSE(PeerAddressIn("ipv4:127.0.0.1:70000: x").has_value());
  EXPECT_FALSE(PeerAddressIn("ipv6:[::1: x").has_value());
}

// Real servers, each with the transport a test names.
class PeerTlsProbeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto p = TestPki::Create();
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    pki_ = new TestPki(std::move(p).value());
  }
  static void TearDownTestSuite() {
    if (pki_ != nullptr) std::filesystem::remove_all(pki_->dir);
    delete pki_;
    pki_ = nullptr;
  }
  static TransportSecurityOptions Tls(bool client_auth) {
    TransportSecurityOptions o;
    o.tls_cert = pki_->server_cert;
    o.tls_key = pki_->server_key;
    o.tls_ca = pki_->ca;
    o.tls_client_auth = client_auth;
    return o;
  }
  // The verdict on a running cluster's coordinator port; with a
  // certificate and key (paths), the probe presents them.
  static PeerTls ProbeCoordinator(const TransportSecurityOptions& security,
                                  const std::string& cert_path = "",
                                  const std::string& key_path = "", std::string* alert = nullptr) {
    SecureCluster cluster(security);
    EXPECT_TRUE(cluster.Start());
    const auto peer = PeerAddressIn("ipv4:" + cluster.coordinator_address() + ": x");
    EXPECT_TRUE(peer.has_value()) << cluster.coordinator_address();
    if (!peer) return PeerTls::kUnknown;
    if (cert_path.empty()) return ProbePeerTls(*peer, kTimeout);
    const std::string cert = Contents(cert_path), key = Contents(key_path);
    const ProbeIdentity identity{cert, key};
    return ProbePeerTls(*peer, kTimeout, &identity, alert);
  }
  static std::string Contents(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_TRUE(in.good()) << path;
    return text.str();
  }
  static TestPki* pki_;
};
TestPki* PeerTlsProbeTest::pki_ = nullptr;

TEST_F(PeerTlsProbeTest, APlaintextPeerSpeaksNoTls) {
  EXPECT_EQ(ProbeCoordinator(TransportSecurityOptions::Insecure()), PeerTls::kNoTls);
}

TEST_F(PeerTlsProbeTest, ATlsPeerCompletesTheHandshake) {
  EXPECT_EQ(ProbeCoordinator(Tls(/*client_auth=*/false)), PeerTls::kTls);
}

TEST_F(PeerTlsProbeTest, APeerUnderClientAuthRequiresACertificate) {
  EXPECT_EQ(ProbeCoordinator(Tls(/*client_auth=*/true)), PeerTls::kRequiresClientCert);
}

// The probe presents the certificate a worker would: the peer ends the
// connection after one from another CA (gRPC 1.51 with a close, no alert),
// and not after one from its own.
TEST_F(PeerTlsProbeTest, APeerUnderClientAuthRefusesACertificateFromAnotherCa) {
  EXPECT_EQ(
      ProbeCoordinator(Tls(/*client_auth=*/true), pki_->other_client_cert, pki_->other_client_key),
      PeerTls::kRefusesOurCertificate);
}

TEST_F(PeerTlsProbeTest, APeerUnderClientAuthAcceptsACertificateFromItsCa) {
  std::string alert;
  EXPECT_EQ(
      ProbeCoordinator(Tls(/*client_auth=*/true), pki_->client_cert, pki_->client_key, &alert),
      PeerTls::kTls);
  EXPECT_EQ(alert, "");
}

// A peer that asks for no certificate judges none.
TEST_F(PeerTlsProbeTest, APeerWithoutClientAuthIgnoresTheCertificate) {
  EXPECT_EQ(
      ProbeCoordinator(Tls(/*client_auth=*/false), pki_->other_client_cert, pki_->other_client_key),
      PeerTls::kTls);
}

// A certificate with another's key cannot be presented: no verdict.
TEST_F(PeerTlsProbeTest, AnIdentityThatDoesNotLoadIsUnknown) {
  EXPECT_EQ(ProbeCoordinator(Tls(/*client_auth=*/true), pki_->client_cert, pki_->other_client_key),
            PeerTls::kUnknown);
}

TEST_F(PeerTlsProbeTest, NothingListeningIsUnknownWithinTheTimeout) {
  int port = 0;
  {
    SecureCluster cluster(TransportSecurityOptions::Insecure());
    ASSERT_TRUE(cluster.Start());
    port = PeerAddressIn("ipv4:" + cluster.coordinator_address() + ": x")->port;
  }  // closed: nothing listens there now
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(ProbePeerTls(PeerAddress{"127.0.0.1", port}, kTimeout), PeerTls::kUnknown);
  EXPECT_LT(std::chrono::steady_clock::now() - started, kTimeout + std::chrono::seconds(1));
}

// A port whose listener never accepts: the kernel completes the TCP
// handshake, and nothing ever answers the probe's.
TEST(PeerTlsProbe, APeerThatNeverAnswersIsUnknownWithinTheTimeout) {
  LoopbackListener listener;
  ASSERT_GT(listener.port(), 0);
  const auto started = std::chrono::steady_clock::now();
  const PeerTls verdict =
      ProbePeerTls(PeerAddress{"127.0.0.1", listener.port()}, std::chrono::milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(verdict, PeerTls::kUnknown);
  EXPECT_GE(took, std::chrono::milliseconds(250));
  EXPECT_LT(took, std::chrono::seconds(2));
}

}  // namespace
}  // namespace loco::test

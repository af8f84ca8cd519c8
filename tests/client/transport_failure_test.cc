// ClassifyUnavailable over the messages gRPC 1.51 gave for each failure,
// copied from real runs (a TLS client against another CA, another name, a
// plaintext port; a plaintext client against a TLS port; nothing listening;
// a name that does not resolve), and RetryPolicy's use of it.
#include "rpc/transport_failure.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/retry_policy.h"
#include "common/log.h"

namespace loco {
namespace {

constexpr const char* kUntrusted =
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:17711: Ssl "
    "handshake failed: SSL_ERROR_SSL: error:0A000086:SSL routines::certificate verify failed";
constexpr const char* kWrongName =
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:17711: Peer name "
    "foo.example is not in peer certificate";
constexpr const char* kPlaintextPeer =
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:17713: Ssl "
    "handshake failed: SSL_ERROR_SSL: error:0A00010B:SSL routines::wrong version number";
constexpr const char* kClosed =
    "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:17711: Socket "
    "closed";
constexpr const char* kRefused =
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:17711: Failed to "
    "connect to remote host: Connection refused";
constexpr const char* kNoName =
    "DNS resolution failed for nosuchhost.invalid:1: C-ares status is not ARES_SUCCESS qtype=A "
    "name=nosuchhost.invalid is_balancer=0: Domain name not found";

TEST(TransportFailure, ClassifiesWhatGrpcSaid) {
  EXPECT_EQ(ClassifyUnavailable(kUntrusted), TransportFailure::kUntrustedPeer);
  EXPECT_EQ(ClassifyUnavailable("... CERTIFICATE_VERIFY_FAILED"), TransportFailure::kUntrustedPeer);
  EXPECT_EQ(ClassifyUnavailable(kWrongName), TransportFailure::kPeerNameMismatch);
  EXPECT_EQ(ClassifyUnavailable(kPlaintextPeer), TransportFailure::kPeerNotTls);
  EXPECT_EQ(ClassifyUnavailable(kClosed), TransportFailure::kClosedAtConnect);
  EXPECT_EQ(ClassifyUnavailable(kRefused), TransportFailure::kRefused);
  EXPECT_EQ(ClassifyUnavailable(kNoName), TransportFailure::kUnresolved);
}

TEST(TransportFailure, ACallInFlightWhosePeerWentAwayIsNotAConnectFailure) {
  EXPECT_EQ(ClassifyUnavailable("Socket closed"), TransportFailure::kOther);
  EXPECT_EQ(ClassifyUnavailable("Connection reset by peer"), TransportFailure::kOther);
  EXPECT_EQ(ClassifyUnavailable("the server is shutting down"), TransportFailure::kOther);
  EXPECT_EQ(ClassifyUnavailable(""), TransportFailure::kOther);
}

TEST(TransportFailure, OnlyTheHandshakesOwnVerdictsAreFinal) {
  EXPECT_TRUE(RetryCannotCure(TransportFailure::kUntrustedPeer));
  EXPECT_TRUE(RetryCannotCure(TransportFailure::kPeerNameMismatch));
  EXPECT_TRUE(RetryCannotCure(TransportFailure::kPeerNotTls));
  EXPECT_FALSE(RetryCannotCure(TransportFailure::kClosedAtConnect));  // also a restart
  EXPECT_FALSE(RetryCannotCure(TransportFailure::kRefused));          // not up yet
  EXPECT_FALSE(RetryCannotCure(TransportFailure::kUnresolved));       // a Service to come
  EXPECT_FALSE(RetryCannotCure(TransportFailure::kOther));
  EXPECT_EQ(TransportHint(TransportFailure::kOther), "");
  EXPECT_NE(TransportHint(TransportFailure::kRefused).find("is the address right"),
            std::string::npos);
}

TEST(TransportFailure, TheSuffixIsTheHintInParenthesesOrNothing) {
  EXPECT_EQ(TransportHintSuffix(kRefused), " (" + TransportHint(TransportFailure::kRefused) + ")");
  EXPECT_EQ(TransportHintSuffix("shutting down"), "");
}

TEST(TransportFailure, RetryPolicyEndsAtTheFirstFinalRefusal) {
  RetryPolicy policy(RetryOptions{/*max_retries=*/-1, 1, 2, /*retry_budget_ms=*/60000}, 1);
  int attempts = 0;
  const grpc::Status s = policy.Run("Test", [&] {
    ++attempts;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, kUntrusted);
  });
  EXPECT_EQ(attempts, 1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(),
            std::string(kUntrusted) + " (" + TransportHint(TransportFailure::kUntrustedPeer) + ")");
}

TEST(TransportFailure, RetryPolicyRetriesASocketClosedWhileConnecting) {
  RetryPolicy policy(RetryOptions{/*max_retries=*/3, 1, 2, 60000}, 1);
  int attempts = 0;
  const grpc::Status s = policy.Run("Test", [&] {
    ++attempts;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, kClosed);
  });
  EXPECT_EQ(attempts, 4);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(s.error_message(),
            std::string(kClosed) + " (" + TransportHint(TransportFailure::kClosedAtConnect) + ")");
}

TEST(TransportFailure, AnUnknownUnavailableRunsOutUnchanged) {
  RetryPolicy policy(RetryOptions{/*max_retries=*/2, 1, 2, 60000}, 1);
  const grpc::Status s = policy.Run(
      "Test", [] { return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down"); });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(s.error_message(), "shutting down");
}

// A connection closed while it was being set up asks the transport check
// (TransportSecurity::RefusalOfThisTransport in a worker): a reason ends the
// Run at once as UNAUTHENTICATED, with the reason appended.
TEST(TransportFailure, RetryPolicyEndsWithTheTransportChecksReason) {
  RetryPolicy policy(RetryOptions{/*max_retries=*/-1, 1, 2, /*retry_budget_ms=*/60000}, 1);
  int asked = 0;
  policy.SetClosedAtConnectCheck([&](std::string_view message) -> std::optional<std::string> {
    ++asked;
    EXPECT_EQ(message, kClosed);
    return "the peer speaks TLS";
  });
  int attempts = 0;
  const grpc::Status s = policy.Run("Test", [&] {
    ++attempts;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, kClosed);
  });
  EXPECT_EQ(attempts, 1);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(), std::string(kClosed) + " (the peer speaks TLS)");
}

// Without a reason the Run retries as before; the check (a probe) is asked
// once per kClosedAtConnectCheckEvery, and never for another failure.
TEST(TransportFailure, RetryPolicyAsksTheTransportCheckOnlyWhenItIsDue) {
  RetryPolicy policy(RetryOptions{/*max_retries=*/5, 1, 2, 60000}, 1);
  int asked = 0;
  policy.SetClosedAtConnectCheck([&](std::string_view) -> std::optional<std::string> {
    ++asked;
    return std::nullopt;
  });
  int attempts = 0;
  grpc::Status s = policy.Run("Test", [&] {
    ++attempts;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, attempts % 2 == 0 ? kRefused : kClosed);
  });
  EXPECT_EQ(attempts, 6);
  EXPECT_EQ(asked, 1) << "the Run lasted well under "
                      << RetryPolicy::kClosedAtConnectCheckEvery.count() << " s";
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  asked = 0;
  s = policy.Run("Test", [] { return grpc::Status(grpc::StatusCode::UNAVAILABLE, kRefused); });
  EXPECT_EQ(asked, 0);
}

// The warnings a RetryPolicy writes, collected from the process's log sink
// (restored to the default at the end of the test).
class RetryLines : public ::testing::Test {
 protected:
  struct Lines {
    std::mutex mu;
    std::vector<std::string> warnings;
  };
  void SetUp() override {
    SetLogSink([lines = lines_](const LogRecord& r) {
      if (r.level != LogLevel::kWarning) return;
      std::lock_guard<std::mutex> l(lines->mu);
      lines->warnings.emplace_back(r.message);
    });
  }
  void TearDown() override { SetLogSink(nullptr); }
  std::vector<std::string> warnings() {
    std::lock_guard<std::mutex> l(lines_->mu);
    return lines_->warnings;
  }
  std::shared_ptr<Lines> lines_ = std::make_shared<Lines>();
};

// A server killed mid-call fails the first attempt without a cause
// ("Broken pipe"); its restart then refuses connections. The first line
// that meets the refusal names it, and a line repeats a hint only when the
// cause changes.
TEST_F(RetryLines, TheFirstLineOfEachCauseCarriesItsHint) {
  RetryPolicy policy(RetryOptions{/*max_retries=*/3, 1, 2, 60000}, 1);
  const std::vector<const char*> failures = {"Broken pipe", kRefused, kRefused, kClosed};
  size_t attempt = 0;
  const grpc::Status s = policy.Run("Push", [&] {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, failures[std::min(attempt++, size_t{3})]);
  });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  const std::vector<std::string> lines = warnings();
  ASSERT_EQ(lines.size(), 3u);
  const std::string refused = TransportHint(TransportFailure::kRefused);
  EXPECT_EQ(lines[0].find('('), lines[0].find("(Broken pipe)")) << lines[0];
  EXPECT_EQ(lines[0].find(refused), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("(" + refused + ")"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[2].find(refused), std::string::npos) << lines[2];
  EXPECT_NE(s.error_message().find(TransportHint(TransportFailure::kClosedAtConnect)),
            std::string::npos)
      << s.error_message();
}

// A loop bounded by time alone (Join's) asks about the address on its
// first line when the cause has no hint of its own, and names a later
// cause's hint when one comes.
TEST_F(RetryLines, ALoopBoundedByTimeAsksAboutTheAddressFirst) {
  RetryPolicy policy(RetryOptions{/*max_retries=*/-1, 1, 2, /*retry_budget_ms=*/10}, 1);
  size_t attempt = 0;
  policy.Run("Join", [&] {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, attempt++ == 0 ? "Broken pipe" : kNoName);
  });
  const std::vector<std::string> lines = warnings();
  ASSERT_GE(lines.size(), 2u);
  EXPECT_NE(lines[0].find("; is the address right?)"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("; " + TransportHint(TransportFailure::kUnresolved) + ")"),
            std::string::npos)
      << lines[1];
}

}  // namespace
}  // namespace loco

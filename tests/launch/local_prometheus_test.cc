// LocalPrometheus with Debian's real prometheus binary: a port taken in the
// window PickFreePort leaves (here, taken on purpose before the start) is
// given up for another, and only Prometheus's own readiness answer counts
// as started, not whatever else accepts connections on the port.
#include "launch/local_prometheus.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/common/run_command.h"

namespace loco {
namespace {

constexpr char kPrometheus[] = "/usr/bin/prometheus";

TEST(LocalPrometheus, APortTakenBeforeItBindsIsGivenUpForAnother) {
  if (::access(kPrometheus, X_OK) != 0 || ::access("/usr/bin/curl", X_OK) != 0) {
    GTEST_SKIP() << "needs Debian's prometheus and curl (scripts/install-deps.sh installs them)";
  }
  // A listener that accepts connections (the kernel completes them) and
  // never answers: connecting to it succeeds, as it would to Prometheus.
  const int taken = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(taken, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&a), len), 0);
  ASSERT_EQ(::listen(taken, 16), 0);
  ASSERT_EQ(::getsockname(taken, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int taken_port = ntohs(a.sin_port);

  const std::string dir =
      (std::filesystem::path(::testing::TempDir()) / "local-prometheus").string();
  LocalPrometheus prometheus(kPrometheus, dir);
  const Status started = prometheus.Start(60, taken_port);
  ::close(taken);
  ASSERT_TRUE(started.ok()) << started.ToString();
  EXPECT_EQ(prometheus.url().find(":" + std::to_string(taken_port)), std::string::npos)
      << prometheus.url() << " is the taken port";
  std::string ready;
  RunCommand("/usr/bin/curl -s --max-time 5 " + prometheus.url() + "/-/ready", &ready);
  EXPECT_NE(ready.find("Ready"), std::string::npos) << ready;
  prometheus.Stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace loco

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
#include <fstream>
#include <iterator>
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

// A restarted server announces a new /metrics port under the same process
// name: its target moves there, so that Prometheus stops scraping the dead
// process's port, and other processes' targets stay.
TEST(LocalPrometheus, ATargetAddedAgainUnderItsNameMovesToTheNewPort) {
  if (::access(kPrometheus, X_OK) != 0 || ::access("/usr/bin/curl", X_OK) != 0) {
    GTEST_SKIP() << "needs Debian's prometheus and curl (scripts/install-deps.sh installs them)";
  }
  const std::string dir =
      (std::filesystem::path(::testing::TempDir()) / "local-prometheus-targets").string();
  LocalPrometheus prometheus(kPrometheus, dir);
  ASSERT_TRUE(prometheus.AddTarget("coordinator", "coordinator", 40001).ok());
  ASSERT_TRUE(prometheus.AddTarget("server", "server-0", 40002).ok());
  const Status started = prometheus.Start(60);
  ASSERT_TRUE(started.ok()) << started.ToString();
  ASSERT_TRUE(prometheus.AddTarget("server", "server-0", 40003).ok());
  ASSERT_TRUE(prometheus.AddTarget("worker", "worker-0", 40004).ok());
  std::ifstream file(dir + "/targets.json");
  const std::string targets((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
  prometheus.Stop();
  std::filesystem::remove_all(dir);
  EXPECT_EQ(prometheus.num_targets(), 3u);
  for (const char* port : {"40001", "40003", "40004"}) {
    EXPECT_NE(targets.find(std::string("127.0.0.1:") + port), std::string::npos)
        << port << " missing from " << targets;
  }
  EXPECT_EQ(targets.find("40002"), std::string::npos) << "the old port stays in " << targets;
  EXPECT_NE(targets.find("\"process\": \"server-0\""), std::string::npos) << targets;
}

}  // namespace
}  // namespace loco

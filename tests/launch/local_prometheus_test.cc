// LocalPrometheus with Debian's real prometheus binary: a port taken in the
// window PickFreePort leaves (here, taken on purpose before the start) is
// given up for another, and only Prometheus's own readiness answer counts
// as started, not whatever else accepts connections on the port.
#include "launch/local_prometheus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/common/loopback_listener.h"
#include "tests/common/run_command.h"

namespace loco {
namespace {

constexpr char kPrometheus[] = "/usr/bin/prometheus";

TEST(LocalPrometheus, APortTakenBeforeItBindsIsGivenUpForAnother) {
  if (::access(kPrometheus, X_OK) != 0 || ::access("/usr/bin/curl", X_OK) != 0) {
    GTEST_SKIP() << "needs Debian's prometheus and curl (scripts/install-deps.sh installs them)";
  }
  // Connecting to it succeeds, as it would to Prometheus; nothing answers.
  LoopbackListener taken;
  const int taken_port = taken.port();
  ASSERT_GT(taken_port, 0);

  const std::string dir =
      (std::filesystem::path(::testing::TempDir()) / "local-prometheus").string();
  LocalPrometheus prometheus(kPrometheus, dir);
  const Status started = prometheus.Start(60, taken_port);
  taken.Close();
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

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

#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

namespace loco {
namespace {

constexpr char kPrometheus[] = "/usr/bin/prometheus";

// The output of `command` (a shell command line).
std::string OutputOf(const std::string& command) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) return out;
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe.get()) != nullptr) out += buf.data();
  return out;
}

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

  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("loco-local-prometheus-" + std::to_string(::getpid())))
                              .string();
  std::filesystem::remove_all(dir);
  LocalPrometheus prometheus(kPrometheus, dir);
  const Status started = prometheus.Start(60, taken_port);
  ::close(taken);
  ASSERT_TRUE(started.ok()) << started.ToString();
  EXPECT_EQ(prometheus.url().find(":" + std::to_string(taken_port)), std::string::npos)
      << prometheus.url() << " is the taken port";
  const std::string ready =
      OutputOf("/usr/bin/curl -s --max-time 5 " + prometheus.url() + "/-/ready");
  EXPECT_NE(ready.find("Ready"), std::string::npos) << ready;
  prometheus.Stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace loco

// loco-health-probe's contract, against a real loco-coordinator on loopback:
// exit 0 and "SERVING" when the server answers SERVING; 1 when the service
// is unknown to the server or nothing listens; 2 on a malformed address.
// The expectations come from the grpc.health.v1 protocol (an unknown
// service name is NOT_FOUND, hence not SERVING), not from the probe.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "launch/child_process.h"

namespace loco {
namespace {

std::string Tmp(const std::string& name) {
  return std::string(::testing::TempDir()) + "/" + name + "." + std::to_string(::getpid());
}

struct ProbeResult {
  int exit_code = -1;
  std::string out;
};

// Runs loco-health-probe with `args` to completion (bounded: 20 s).
ProbeResult RunProbe(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {std::string(LOCO_BIN_DIR) + "/loco-health-probe"};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess probe("probe", argv, Tmp("probe.log"));
  ProbeResult r;
  if (!probe.Start().ok()) return r;
  std::vector<std::string> lines;
  for (int i = 0; i < 200 && !probe.Poll(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!probe.exited()) {
    probe.Stop(1000);
    return r;
  }
  probe.ReadLines(&lines);
  for (const auto& l : lines) r.out += l + "\n";
  r.out += probe.LogTail(5);
  r.exit_code = probe.exit_code();
  return r;
}

// Starts `c`, waits (bounded) for its "LISTENING host:port" line.
std::string StartAndListen(ChildProcess& c) {
  if (!c.Start().ok()) return "";
  for (int i = 0; i < 60; ++i) {
    auto line = c.WaitLine(500);
    if (line && line->rfind("LISTENING ", 0) == 0) return line->substr(10);
    if (c.Poll()) return "";
  }
  return "";
}

TEST(HealthProbe, ServingUnknownServiceAndGone) {
  ChildProcess coord("coordinator",
                     {std::string(LOCO_BIN_DIR) + "/loco-coordinator", "--host=127.0.0.1",
                      "--port=0", "--num-servers=1", "--insecure"},
                     Tmp("probe-coordinator.log"));
  const std::string address = StartAndListen(coord);
  ASSERT_FALSE(address.empty()) << coord.LogTail(10);

  ProbeResult serving = RunProbe({"--address", address, "--timeout-ms=5000"});
  EXPECT_EQ(serving.exit_code, 0) << serving.out;
  EXPECT_NE(serving.out.find("SERVING"), std::string::npos) << serving.out;

  ProbeResult quiet = RunProbe({"--address=" + address, "--quiet"});
  EXPECT_EQ(quiet.exit_code, 0) << quiet.out;
  EXPECT_EQ(quiet.out.find("SERVING"), std::string::npos) << quiet.out;

  ProbeResult unknown = RunProbe({"--address=" + address, "--service=no.such.Service"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown.out;

  coord.Stop(10000);
  ASSERT_TRUE(coord.exited());
  // Nothing listens there any more: no answer within the deadline.
  ProbeResult gone = RunProbe({"--address=" + address, "--timeout-ms=300"});
  EXPECT_EQ(gone.exit_code, 1) << gone.out;
}

// Checked as every program checks a host:port (common/host_port.h): the
// host too, and an IPv6 host only in brackets ("::1:7000" leaves the port
// ambiguous). Exit 2 naming --address.
TEST(HealthProbe, MalformedAddressesAreRefused) {
  for (const char* bad : {"", "localhost", "host:", ":7000", "host:0", "host:65536", "host:70a",
                          "127.0.0.1:99999", "bad!!:7000", "::1:7000", "[::1:7000"}) {
    ProbeResult r = RunProbe({std::string("--address=") + bad});
    EXPECT_EQ(r.exit_code, 2) << "'" << bad << "': " << r.out;
    EXPECT_NE(r.out.find("--address"), std::string::npos) << "'" << bad << "': " << r.out;
  }
  ProbeResult missing = RunProbe({});
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  EXPECT_NE(missing.out.find("--address (or $LOCO_PROBE_ADDRESS) is required"), std::string::npos)
      << missing.out;
}

}  // namespace
}  // namespace loco

// CheckHost and CheckHostPort: the addresses the programs listen on and
// dial are checked where they are given, with a message that says what is
// wrong and what would be right.
#include "common/host_port.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/common/says.h"

namespace loco {
namespace {

std::string HostPortRefusal(const std::string& address) {
  const Status s = CheckHostPort(address);
  if (s.ok()) return "";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  return s.message();
}

TEST(CheckHostPort, TakesHostNamesAndAddressesWithAPortInRange) {
  for (const char* good :
       {"127.0.0.1:7000", "localhost:1", "coordinator:65535", "loco-coordinator.ns.svc:7000",
        "my_service:80", "example.com.:443", "[::1]:7000", "[fe80::1%eth0]:7000",
        "[::ffff:127.0.0.1]:7000", "10.0.0.1:07000"}) {
    EXPECT_EQ(HostPortRefusal(good), "") << good;
  }
}

// gRPC would dial 127.0.0.1:99999 as port 34463 (99999 mod 65536), and
// retry "foo" (no port) until its deadline.
TEST(CheckHostPort, RefusesAPortOutsideItsRangeSayingWhichRange) {
  EXPECT_TRUE(Says(HostPortRefusal("127.0.0.1:99999"),
                   {"the port 99999 is outside [1, 65535]", "expected host:port"}));
  EXPECT_TRUE(Says(HostPortRefusal("127.0.0.1:65536"), {"the port 65536 is outside [1, 65535]"}));
  EXPECT_TRUE(Says(HostPortRefusal("h:0"), {"the port 0 is outside [1, 65535]"}));
  EXPECT_TRUE(Says(HostPortRefusal("h:99999999"), {"'99999999' is not a number in [1, 65535]"}));
  EXPECT_TRUE(Says(HostPortRefusal("h:12a"), {"'12a' is not a number"}));
  EXPECT_TRUE(Says(HostPortRefusal("h:"), {"the port '' is not a number"}));
  EXPECT_TRUE(Says(HostPortRefusal("h:-1"), {"'-1' is not a number"}));
}

TEST(CheckHostPort, RefusesWhatIsNotHostColonPort) {
  EXPECT_TRUE(Says(HostPortRefusal("foo"),
                   {"expected host:port", "e.g. 127.0.0.1:7000", "there is no port"}));
  EXPECT_TRUE(Says(HostPortRefusal(""), {"there is no port"}));
  EXPECT_TRUE(Says(HostPortRefusal(":7000"), {"the host is empty"}));
  EXPECT_TRUE(Says(HostPortRefusal("::1:7000"),
                   {"the host '::1' holds a ':'", "an IPv6 host in brackets, e.g. [::1]:7000"}));
  EXPECT_TRUE(Says(HostPortRefusal("[::1:7000"), {"'[::1' is not a host name or an IP address"}));
  EXPECT_TRUE(Says(HostPortRefusal("bad!!:7000"), {"'bad!!' is not a host name"}));
  EXPECT_TRUE(Says(HostPortRefusal("a..b:7000"), {"'a..b' is not a host name"}));
  EXPECT_TRUE(Says(HostPortRefusal(std::string(300, 'h') + ":1"), {"is not a host name"}));
  EXPECT_TRUE(Says(HostPortRefusal("[]:7000"), {"'[]' is not a host name"}));
}

// Hosts to listen on take bare IPv6 addresses too (the wildcard "::").
TEST(CheckHost, TakesNamesAndAddressesAndRefusesTheRest) {
  for (const char* good : {"127.0.0.1", "0.0.0.0", "::", "::1", "[::1]", "localhost",
                           "pod-0.loco.default.svc.cluster.local"}) {
    EXPECT_TRUE(CheckHost(good).ok()) << good << ": " << CheckHost(good).ToString();
  }
  for (const char* bad : {"", "bad!!", "host name", "a/b", ".", "[::1", "::g"}) {
    const Status s = CheckHost(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_TRUE(Says(s.message(), {"expected"})) << s.message();
  }
}

}  // namespace
}  // namespace loco

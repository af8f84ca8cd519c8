// loco-coordinator's and loco-server's command lines, with the real
// binaries: a flag they cannot use is refused with exit 2 before anything
// starts, naming the flag and what would be right, and a refused start
// changes nothing on disk.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/common/run_command.h"
#include "tests/common/says.h"

namespace loco {
namespace {

// `binary` of the build with `args` (bounded: 30 s); its exit code, and
// both streams in *output.
int RunProgram(const std::string& binary, const std::string& args, std::string* output) {
  return RunCommand("timeout 30 " LOCO_BIN_DIR "/" + binary + " " + args + " 2>&1", output);
}

// A new, empty folder under the test's temporary directory.
std::string EmptyFolder(const std::string& name) {
  const std::string path =
      std::string(::testing::TempDir()) + "/" + name + "." + std::to_string(::getpid());
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

// --host=bad!! failed only when the server started, after the state
// directory got its incarnation and ticket key: the hosts are checked with
// the flags now, and a refused start leaves the state directory empty.
TEST(CoordinatorFlags, ARefusedStartWritesNothingInTheStateDirectory) {
  const std::string state = EmptyFolder("coordinator-state");
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {Case{"--insecure --host=bad!!",
                             "invalid value 'bad!!' for --host: 'bad!!' is not a host name"},
                        Case{"--insecure --metrics-host=bad!! --metrics-port=1",
                             "invalid value 'bad!!' for --metrics-host"},
                        Case{"--tls-cert=/nonexistent/cert.pem --tls-key=/nonexistent/key.pem",
                             "/nonexistent/cert.pem"}}) {
    std::string out;
    EXPECT_EQ(
        RunProgram("loco-coordinator", "--num-servers=1 --state-dir=" + state + " " + c.args, &out),
        2)
        << c.args << "\n"
        << out;
    EXPECT_TRUE(Says(out, {c.says})) << out;
    EXPECT_TRUE(std::filesystem::is_empty(state))
        << c.args << ": something was written in " << state;
  }
  std::filesystem::remove_all(state);
}

// The coordinator's address: a port above 65535 would be dialled as
// another port (99999 as 34463), and an address without a port was retried
// for --register-timeout-s; both are refused at once, naming --coordinator.
// So is a bad --advertise-address, which the coordinator would refuse.
TEST(ServerFlags, AddressesAreHostAndPortInRange) {
  struct Case {
    std::string args, says;
  };
  for (const Case& c :
       {Case{"--coordinator=127.0.0.1:99999",
             "invalid value '127.0.0.1:99999' for --coordinator: the port 99999 is outside "
             "[1, 65535]"},
        Case{"--coordinator=foo", "invalid value 'foo' for --coordinator: expected host:port"},
        Case{"--coordinator=127.0.0.1:1 --advertise-address=10.0.0.1",
             "invalid value '10.0.0.1' for --advertise-address"},
        Case{"--coordinator=127.0.0.1:1 --host=bad!!", "invalid value 'bad!!' for --host"}}) {
    std::string out;
    EXPECT_EQ(RunProgram("loco-server", "--insecure --register-timeout-s=1 " + c.args, &out), 2)
        << c.args << "\n"
        << out;
    EXPECT_TRUE(Says(out, {c.says})) << out;
  }
}

// The AdamW flags are checked on the float the shard computes with, and
// their bounds are printed as they read back: 0.9999999995 was refused
// naming a range up to "1", and 0.99999999 passed the flag only to be
// refused as "beta2 1 is not in [0, 1)", naming no flag.
TEST(ServerFlags, AdamWFlagsAreCheckedAsTheFloatsTheShardUses) {
  for (const std::string beta2 : {"0.9999999995", "0.99999999"}) {
    std::string out;
    EXPECT_EQ(
        RunProgram("loco-server",
                   "--insecure --coordinator=127.0.0.1:1 --check-flags --beta2=" + beta2, &out),
        2)
        << out;
    EXPECT_TRUE(Says(out, {"invalid value '" + beta2 +
                           "' for --beta2: expected a number in [0, 0.99999994] as a 32-bit "
                           "float, which the program computes with; as one it is 1"}))
        << out;
  }
  std::string out;
  EXPECT_EQ(RunProgram("loco-server",
                       "--insecure --coordinator=127.0.0.1:1 --check-flags "
                       "--beta2=0.99999994",
                       &out),
            0)
      << out;
}

}  // namespace
}  // namespace loco

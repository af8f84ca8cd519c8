// loco-coordinator's and loco-server's command lines, with the real
// binaries: a flag they cannot use is refused with exit 2 before anything
// starts, naming the flag and what would be right.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace loco

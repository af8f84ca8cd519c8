// loco-coordinator's and loco-server's command lines, with the real
// binaries: a flag they cannot use is refused with exit 2 before anything
// starts, naming the flag and what would be right, and a refused start
// changes nothing on disk.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iterator>
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

// A setting refused before the server starts is exit 2 with the reason,
// from --check-flags and from a real start alike; these failed only once
// the server had started (exit 1: a port in use, a checkpoint folder that
// could not be made) or named no flag (lr * weight_decay).
TEST(ServerFlags, SettingsThatWouldFailOnceStartedAreUsageErrors) {
  const std::string folder = EmptyFolder("server-usage");
  const std::string file = folder + "/file";
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    std::fclose(f);
  }
  struct Case {
    std::string args, says;
  };
  for (const Case& c :
       {Case{"--port=17000 --metrics-port=17000",
             "invalid value '17000' for --metrics-port: --port asks for the same port"},
        Case{"--health-port=17001 --metrics-port=17001",
             "invalid value '17001' for --metrics-port: --health-port asks for the same port"},
        Case{"--checkpoint-dir=" + file,
             "invalid value '" + file + "' for --checkpoint-dir: it is a regular file"},
        Case{"--checkpoint-dir=" + file + "/no/ckpt",
             "invalid value '" + file + "/no/ckpt' for --checkpoint-dir: it does not exist, and '"},
        Case{"--lr=0.5 --weight-decay=4", "--lr 0.5 times --weight-decay 4 is 2, above 1"}}) {
    for (const std::string check : {" --check-flags", ""}) {
      std::string out;
      const std::string args = "--insecure --coordinator=127.0.0.1:1 --register-timeout-s=1 ";
      EXPECT_EQ(RunProgram("loco-server", args + c.args + check, &out), 2)
          << c.args << check << "\n"
          << out;
      EXPECT_TRUE(Says(out, {"loco-server: " + c.says})) << out;
      EXPECT_FALSE(Says(out, {"LISTENING"})) << out;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(folder + "/no"));
  std::filesystem::remove_all(folder);
}

// The return path's flags take effect with --pull-codec delta only, and
// --checkpoint-every/--checkpoint-keep with --checkpoint-dir only: typed
// where they would be ignored they are refused; from the environment they
// are a warning and the server goes on.
TEST(ServerFlags, AFlagTheOtherSettingsWouldIgnoreIsRefusedWhenTyped) {
  struct Case {
    std::string args, says;
  };
  for (const Case& c :
       {Case{"--pull-codec=fp32 --pull-bits=4",
             "--pull-bits has no effect here: only --pull-codec delta uses it (this run is "
             "--pull-codec fp32, which sends every pull the fp32 parameters)"},
        Case{"--pull-codec=bf16 --pull-block-size=64", "--pull-block-size has no effect here"},
        Case{"--pull-codec=fp32 --full-sync-every=10", "--full-sync-every has no effect here"},
        Case{"--checkpoint-every=10",
             "--checkpoint-every has no effect here: only --checkpoint-dir turns checkpoints "
             "on"},
        Case{"--checkpoint-keep=5", "--checkpoint-keep has no effect here"}}) {
    std::string out;
    EXPECT_EQ(RunProgram("loco-server",
                         "--insecure --coordinator=127.0.0.1:1 --check-flags " + c.args, &out),
              2)
        << c.args << "\n"
        << out;
    EXPECT_TRUE(Says(out, {"loco-server: " + c.says})) << out;
  }
  for (const std::string ok : {"--pull-codec=delta --pull-bits=4 --pull-block-size=64 "
                               "--full-sync-every=10",
                               "--pull-bits=4",  // delta is the default
                               "--pull-codec=fp32"}) {
    std::string out;
    EXPECT_EQ(
        RunProgram("loco-server", "--insecure --coordinator=127.0.0.1:1 --check-flags " + ok, &out),
        0)
        << ok << "\n"
        << out;
  }
  std::string out;
  EXPECT_EQ(RunCommand("env LOCO_PULL_BITS=4 LOCO_CHECKPOINT_EVERY=10 timeout 30 " LOCO_BIN_DIR
                       "/loco-server --insecure --coordinator=127.0.0.1:1 --check-flags "
                       "--pull-codec=fp32 2>&1",
                       &out),
            0)
      << out;
  EXPECT_TRUE(Says(out, {"$LOCO_PULL_BITS is set but has no effect here",
                         "$LOCO_CHECKPOINT_EVERY is set but has no effect here"}))
      << out;
}

// A refused value from the environment names its variable; a refusal of
// code that knows the options, not the flags (the TLS files), says which
// of the flags it names came from the environment.
TEST(ServerFlags, ARefusedValueFromTheEnvironmentNamesItsVariable) {
  std::string out;
  EXPECT_EQ(RunCommand("env LOCO_METRICS_PORT=17000 timeout 30 " LOCO_BIN_DIR
                       "/loco-server --insecure --coordinator=127.0.0.1:1 --check-flags "
                       "--port=17000 2>&1",
                       &out),
            2)
      << out;
  EXPECT_TRUE(Says(out, {"invalid value '17000' for $LOCO_METRICS_PORT (for --metrics-port): "
                         "--port asks for the same port"}))
      << out;
  out.clear();
  EXPECT_EQ(RunCommand("env LOCO_HEALTH_PORT=17003 timeout 30 " LOCO_BIN_DIR
                       "/loco-server --insecure --coordinator=127.0.0.1:1 --check-flags "
                       "--port=17003 2>&1",
                       &out),
            2)
      << out;
  EXPECT_TRUE(Says(out, {"$LOCO_HEALTH_PORT=17003 (for --health-port) must differ from --port"}))
      << out;
  out.clear();
  EXPECT_EQ(RunCommand("env LOCO_SHARD_ALIGN=100 timeout 30 " LOCO_BIN_DIR
                       "/loco-coordinator --insecure --num-servers=1 2>&1",
                       &out),
            2)
      << out;
  EXPECT_TRUE(Says(out, {"invalid value '100' for $LOCO_SHARD_ALIGN (for --shard-align): "
                         "expected a multiple of 32"}))
      << out;
  out.clear();
  EXPECT_EQ(RunCommand("env LOCO_TLS_CERT=/nonexistent/cert.pem LOCO_TLS_KEY=/nonexistent/key.pem "
                       "timeout 30 " LOCO_BIN_DIR
                       "/loco-server --coordinator=127.0.0.1:1 --check-flags 2>&1",
                       &out),
            2)
      << out;
  EXPECT_TRUE(Says(out, {"/nonexistent/cert.pem",
                         "(set in the environment: $LOCO_TLS_CERT for "
                         "--tls-cert"}))
      << out;
}

// The coordinator's ports and --state-dir: exit 2 naming the flag, before
// the state directory is written or a port is bound. The metrics port on
// the main port started the service and then failed (exit 1); a state
// directory that was a file, or missing, failed after the checks.
TEST(CoordinatorFlags, PortsAndTheStateDirectoryAreCheckedBeforeAnythingStarts) {
  const std::string state = EmptyFolder("coordinator-usage");
  const std::string file = state + "/file";
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    std::fclose(f);
  }
  const std::string missing = state + "/missing";
  struct Case {
    std::string args, says;
  };
  for (const Case& c :
       {Case{"--state-dir=" + state + " --port=17002 --metrics-port=17002",
             "invalid value '17002' for --metrics-port: --port asks for the same port"},
        Case{"--state-dir=" + file,
             "invalid value '" + file + "' for --state-dir: it is a regular file; expected"},
        Case{"--state-dir=" + state + " --heartbeat-interval-ms=500 --heartbeat-timeout-ms=500",
             "--heartbeat-interval-ms 500 must be below --heartbeat-timeout-ms 500"},
        Case{"--state-dir=" + missing,
             "invalid value '" + missing + "' for --state-dir: there is no such directory"}}) {
    std::string out;
    EXPECT_EQ(RunProgram("loco-coordinator", "--num-servers=1 --insecure " + c.args, &out), 2)
        << c.args << "\n"
        << out;
    EXPECT_TRUE(Says(out, {"loco-coordinator: " + c.says})) << out;
    EXPECT_FALSE(Says(out, {"LISTENING"})) << out;
  }
  // Only the file this test made is there: no incarnation, no key.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(state),
                          std::filesystem::directory_iterator()),
            1);
  std::filesystem::remove_all(state);
}

}  // namespace
}  // namespace loco

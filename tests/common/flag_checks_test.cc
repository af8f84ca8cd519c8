// The checks several binaries share once their flags are parsed: ports two
// listeners of one process would both ask for, directories a flag names for
// the program to write in, and AdamW's learning rate against its weight
// decay. Each refusal names the flag (by its variable when the value came
// from the environment), what is wrong and what would be right.
#include "common/flag_checks.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/adamw_limits.h"
#include "common/flags.h"
#include "tests/common/map_environment.h"
#include "tests/common/says.h"

namespace loco {
namespace {

TEST(HostsMayOverlap, SameAddressWildcardsAndLocalhost) {
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"127.0.0.1", "127.0.0.1"},
           {"0.0.0.0", "127.0.0.1"},
           {"10.0.0.5", "::"},
           {"[::]", "10.0.0.5"},
           {"localhost", "127.0.0.1"},
           {"::1", "localhost"},
           {"[::1]", "::1"},
           {"Coordinator.Example", "coordinator.example"}}) {
    EXPECT_TRUE(HostsMayOverlap(a, b)) << a << " " << b;
  }
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"127.0.0.1", "10.0.0.5"}, {"10.0.0.5", "10.0.0.6"}, {"localhost", "10.0.0.5"}}) {
    EXPECT_FALSE(HostsMayOverlap(a, b)) << a << " " << b;
  }
}

// CheckListenerPorts over a server's or the coordinator's three listeners,
// as their flags declare them, parsed from `args` and `env`; its message,
// empty when accepted.
std::string PortsRefusal(const std::vector<std::string>& args,
                         const std::map<std::string, std::string>& env = {}) {
  FlagSet flags("prog");
  std::string host, metrics_host;
  int64_t port = 0, health_port = 0, metrics_port = 0;
  flags.AddString("host", "LOCO_HOST", "127.0.0.1", "", &host);
  flags.AddInt("port", "LOCO_PORT", 0, 0, 65535, "", &port);
  flags.AddInt("health-port", "LOCO_HEALTH_PORT", 0, 0, 65535, "", &health_port);
  flags.AddString("metrics-host", "LOCO_METRICS_HOST", "127.0.0.1", "", &metrics_host);
  flags.AddInt("metrics-port", "LOCO_METRICS_PORT", 0, 0, 65535, "", &metrics_port);
  bool help = false;
  const Status parsed = flags.Parse(args, MapEnvironment(env), &help);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString();
  const Status s = CheckListenerPorts(
      flags, ServiceListeners(host, port, health_port, metrics_host, metrics_port));
  if (s.ok()) return "";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  return s.message();
}

// --metrics-port equal to --port started the gRPC service and then failed
// to bind /metrics (exit 1, "address already in use"): refused with the
// flags now. 0 is no port of its own (a free one, or off) and never
// collides.
TEST(ListenerPorts, MetricsOnTheServicesPortIsRefused) {
  EXPECT_EQ(PortsRefusal({"--port=7000", "--metrics-port=7000"}),
            "invalid value '7000' for --metrics-port: --port asks for the same port, on "
            "addresses that overlap (--host 127.0.0.1, --metrics-host 127.0.0.1), and one port "
            "serves one listener; expected another port, or 0 for no /metrics endpoint");
  EXPECT_TRUE(Says(PortsRefusal({"--health-port=7001", "--metrics-port=7001", "--host=0.0.0.0"}),
                   {"'7001' for --metrics-port: --health-port asks for the same port",
                    "(--host 0.0.0.0, --metrics-host 127.0.0.1)"}));
  EXPECT_TRUE(Says(PortsRefusal({"--port=7000", "--health-port=7000"}),
                   {"'7000' for --health-port: --port asks for the same port, both on --host "
                    "127.0.0.1",
                    "or 0 for no health port"}));
  EXPECT_EQ(PortsRefusal({"--port=7000", "--health-port=7001", "--metrics-port=9400"}), "");
  EXPECT_EQ(PortsRefusal({"--port=0", "--metrics-port=0"}), "");
  EXPECT_EQ(PortsRefusal({"--metrics-port=9400"}), "");
  // Distinct addresses may share a port number.
  EXPECT_EQ(PortsRefusal({"--port=7000", "--metrics-port=7000", "--host=10.0.0.5"}), "");
}

TEST(ListenerPorts, APortFromTheEnvironmentIsNamedByItsVariable) {
  EXPECT_TRUE(Says(PortsRefusal({"--port=7000"}, {{"LOCO_METRICS_PORT", "7000"}}),
                   {"invalid value '7000' for $LOCO_METRICS_PORT (for --metrics-port): --port "
                    "asks for the same port"}));
}

// A folder of this test's own, removed after.
class DirectoryFlagTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = "dir-flag." + std::to_string(::getpid());
    dir_ = (std::filesystem::path(::testing::TempDir()) / name).string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    file_ = dir_ + "/file";
    std::ofstream(file_) << "x";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, file_;
};

// A checkpoint folder that was a regular file, or whose parent was missing,
// failed only once the server had started (exit 1); a state directory that
// was a file or missing failed once the coordinator checked its flags and
// began to start. Both are refused with the flags, saying which and what is
// expected.
TEST_F(DirectoryFlagTest, AFileOnThePathOrAMissingStateDirIsRefusedSayingWhichAndWhatIsExpected) {
  for (const DirectoryUse use : {DirectoryUse::kCreate, DirectoryUse::kExisting}) {
    EXPECT_EQ(CheckDirectoryFlag("--checkpoint-dir", file_, use).message(),
              "invalid value '" + file_ + "' for --checkpoint-dir: it is a regular file; " +
                  (use == DirectoryUse::kCreate
                       ? "expected an existing directory, or a new one below an existing "
                         "directory"
                       : "expected an existing directory"));
  }
  const std::string create_expected =
      "expected an existing directory, or a new one below an existing directory";
  EXPECT_EQ(
      CheckDirectoryFlag("--checkpoint-dir", file_ + "/ckpt", DirectoryUse::kCreate).message(),
      "invalid value '" + file_ + "/ckpt' for --checkpoint-dir: it does not exist, and '" + file_ +
          "' on its path is a regular file; " + create_expected);
  // The nearest existing part of the path decides, however deep the rest.
  EXPECT_TRUE(Says(
      CheckDirectoryFlag("--checkpoint-dir", file_ + "/a/b/ckpt", DirectoryUse::kCreate).message(),
      {"and '" + file_ + "' on its path is a regular file"}));
  EXPECT_EQ(CheckDirectoryFlag("--state-dir", dir_ + "/state", DirectoryUse::kExisting).message(),
            "invalid value '" + dir_ + "/state' for --state-dir: there is no such directory, and " +
                "it is not created; expected an existing directory (create it first)");
  EXPECT_TRUE(
      Says(CheckDirectoryFlag("$LOCO_STATE_DIR (for --state-dir)", file_, DirectoryUse::kExisting)
               .message(),
           {"for $LOCO_STATE_DIR (for --state-dir): it is a regular file"}));
  // Nothing was made.
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/state"));
}

TEST_F(DirectoryFlagTest, ADirectoryOrANewOneInAnExistingOneIsAccepted) {
  EXPECT_TRUE(CheckDirectoryFlag("--checkpoint-dir", dir_, DirectoryUse::kCreate).ok());
  EXPECT_TRUE(CheckDirectoryFlag("--checkpoint-dir", dir_ + "/", DirectoryUse::kCreate).ok());
  EXPECT_TRUE(CheckDirectoryFlag("--checkpoint-dir", dir_ + "/new", DirectoryUse::kCreate).ok());
  EXPECT_TRUE(CheckDirectoryFlag("--checkpoint-dir", dir_ + "/new/", DirectoryUse::kCreate).ok());
  // Created with its missing parents, as the checkpoint writer does.
  EXPECT_TRUE(
      CheckDirectoryFlag("--checkpoint-dir", dir_ + "/new/run/ckpt", DirectoryUse::kCreate).ok());
  EXPECT_TRUE(
      CheckDirectoryFlag("--checkpoint-dir", "relative/new/ckpt", DirectoryUse::kCreate).ok());
  EXPECT_TRUE(CheckDirectoryFlag("--state-dir", dir_, DirectoryUse::kExisting).ok());
  EXPECT_TRUE(CheckDirectoryFlag("--state-dir", "", DirectoryUse::kExisting).ok());  // none
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/new"));
}

TEST_F(DirectoryFlagTest, ADirectoryThisProcessMayNotWriteInIsRefused) {
  if (::geteuid() == 0) GTEST_SKIP() << "root may write anywhere";
  const std::string locked = dir_ + "/locked";
  std::filesystem::create_directories(locked);
  std::filesystem::permissions(
      locked, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  EXPECT_TRUE(Says(CheckDirectoryFlag("--checkpoint-dir", locked, DirectoryUse::kCreate).message(),
                   {"this process may not write in that directory"}));
  EXPECT_TRUE(Says(
      CheckDirectoryFlag("--checkpoint-dir", locked + "/ckpt", DirectoryUse::kCreate).message(),
      {"this process may not create it in '" + locked + "'"}));
  std::filesystem::permissions(locked, std::filesystem::perms::owner_all);
}

// The refusal of lr * weight_decay > 1 came from the kernels' check and
// named no flag ("lr * weight_decay = 2 exceeds 1"); it names both flags,
// their values and the product.
TEST(LrTimesWeightDecay, AProductAboveOneIsRefusedNamingBothFlags) {
  FlagSet flags("prog");
  double lr = 0, weight_decay = 0;
  flags.AddFloat("lr", "LOCO_LR", 1e-3, kLearningRateRange, "", &lr);
  flags.AddFloat("weight-decay", "LOCO_WEIGHT_DECAY", 0, {.min = 0, .max = 1e3f}, "",
                 &weight_decay);
  bool help = false;
  const auto no_environment = [](const char*) -> const char* { return nullptr; };
  ASSERT_TRUE(flags.Parse({"--lr=0.5", "--weight-decay=4"}, no_environment, &help).ok());
  EXPECT_EQ(CheckLrTimesWeightDecay(flags, lr, weight_decay).message(),
            "--lr 0.5 times --weight-decay 4 is 2, above 1: AdamW multiplies every parameter by "
            "1 - lr * weight decay each step, which would flip their sign; expected a product of "
            "at most 1 (a smaller --lr or --weight-decay)");
  EXPECT_TRUE(CheckLrTimesWeightDecay(flags, 0.5, 2).ok());  // exactly 1
  EXPECT_TRUE(CheckLrTimesWeightDecay(flags, 1e-3, 0.01).ok());
  const auto decay_1 = [](const char* name) -> const char* {
    return std::string(name) == "LOCO_WEIGHT_DECAY" ? "1" : nullptr;
  };
  ASSERT_TRUE(flags.Parse({"--lr=2"}, decay_1, &help).ok());
  EXPECT_TRUE(Says(CheckLrTimesWeightDecay(flags, lr, weight_decay).message(),
                   {"--lr 2 times $LOCO_WEIGHT_DECAY (for --weight-decay) 1 is 2, above 1"}));
}

}  // namespace
}  // namespace loco

// The command lines loco-launch starts its children with hand every number
// on exactly: the child parses back the very double the launcher was given.
#include "launch/child_argv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>

#include "common/adamw_limits.h"
#include "common/flags.h"

namespace loco {
namespace {

// --lr as loco-server's FlagSet parses it from `argv` (which must hold it once).
double ServerParsesLr(const std::vector<std::string>& argv) {
  std::vector<std::string> lr_args;
  std::copy_if(argv.begin(), argv.end(), std::back_inserter(lr_args),
               [](const std::string& arg) { return arg.rfind("--lr=", 0) == 0; });
  EXPECT_EQ(lr_args.size(), 1u);
  double lr = -1;
  FlagSet flags("loco-server");
  flags.AddFloat("lr", "LOCO_LR", 1e-3, kLearningRateRange, "", &lr);
  bool help = false;
  const Status parsed =
      flags.Parse(lr_args, [](const char*) -> const char* { return nullptr; }, &help);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString();
  return lr;
}

TEST(ChildArgv, ServerLearningRateParsesBackToTheSameDouble) {
  // 1e-7 became "0.000000" with six decimals; 0.1 + 0.2 needs all 17 digits.
  for (double lr : {1e-7, 0.1 + 0.2, 1.0 / 3, 3e-4, 1e-3, 1e-30, double{kLearningRateRange.max}}) {
    LaunchOptions options;
    options.lr = lr;
    const std::vector<std::string> argv = ServerArgv(options, 1, "127.0.0.1:7000");
    EXPECT_EQ(ServerParsesLr(argv), lr) << "lr " << lr;
  }
}

TEST(ChildArgv, ServerTakesItsShardAndTheCoordinatorAndTheUsersFlagsLast) {
  LaunchOptions options;
  options.bin_dir = "/opt/loco/bin";
  options.servers = 3;
  options.checkpoint_dir = "/tmp/ckpt";
  options.checkpoint_every = 10;
  options.server_args = {"--lr=0.5"};
  const std::vector<std::string> argv = ServerArgv(options, 2, "127.0.0.1:7000");
  ASSERT_FALSE(argv.empty());
  EXPECT_EQ(argv.front(), "/opt/loco/bin/loco-server");
  for (const char* expected : {"--port=0", "--shard-id=2", "--num-servers=3",
                               "--coordinator=127.0.0.1:7000", "--checkpoint-dir=/tmp/ckpt",
                               "--checkpoint-every=10"}) {
    EXPECT_NE(std::find(argv.begin(), argv.end(), expected), argv.end()) << expected;
  }
  // The user's flags come last, so that they override the launcher's.
  EXPECT_EQ(argv.back(), "--lr=0.5");
}

TEST(ChildArgv, WorkerTrainsUntilTheTotalStepWithTheUsersFlagsLast) {
  LaunchOptions options;
  options.bin_dir = "/opt/loco/bin";
  options.codec = "ef";
  options.bits = 2;
  options.worker_args = {"--bits=8"};
  const std::vector<std::string> argv = WorkerArgv(options, "127.0.0.1:7000", 1234);
  ASSERT_FALSE(argv.empty());
  EXPECT_EQ(argv.front(), "/opt/loco/bin/loco-worker");
  for (const char* expected :
       {"--coordinator=127.0.0.1:7000", "--codec=ef", "--bits=2", "--steps=1234"}) {
    EXPECT_NE(std::find(argv.begin(), argv.end(), expected), argv.end()) << expected;
  }
  EXPECT_EQ(argv.back(), "--bits=8");
}

// loco-worker refuses --bits and --block-size typed beside a codec that
// sends full-precision values: the launcher hands them on with a block
// codec only.
TEST(ChildArgv, WorkerGetsBitsAndBlockSizeWithABlockCodecOnly) {
  LaunchOptions options;
  options.bits = 8;
  options.block_size = 64;
  for (const char* codec : {"naive", "ef", "loco"}) {
    options.codec = codec;
    const std::vector<std::string> argv = WorkerArgv(options, "127.0.0.1:7000", 10);
    for (const char* expected : {"--bits=8", "--block-size=64"}) {
      EXPECT_NE(std::find(argv.begin(), argv.end(), expected), argv.end()) << codec << expected;
    }
  }
  for (const char* codec : {"fp32", "bf16"}) {
    options.codec = codec;
    for (const std::string& arg : WorkerArgv(options, "127.0.0.1:7000", 10)) {
      EXPECT_NE(arg.rfind("--bits", 0), 0u) << codec << ": " << arg;
      EXPECT_NE(arg.rfind("--block-size", 0), 0u) << codec << ": " << arg;
    }
  }
  EXPECT_EQ(PushCodecNames(), (std::vector<std::string>{"fp32", "bf16", "naive", "ef", "loco"}));
}

TEST(ChildArgv, CoordinatorWaitsForEveryServer) {
  LaunchOptions options;
  options.servers = 5;
  options.heartbeat_timeout_ms = 1500;
  const std::vector<std::string> argv = CoordinatorArgv(options);
  for (const char* expected : {"--port=0", "--num-servers=5", "--heartbeat-timeout-ms=1500"}) {
    EXPECT_NE(std::find(argv.begin(), argv.end(), expected), argv.end()) << expected;
  }
}

// Settings that must differ between processes are refused when the
// environment holds them (every child would inherit one value); unset, an
// empty value and a port of 0 (off) pass.
TEST(ChildArgv, APerProcessSettingInTheEnvironmentIsRefusedNamingIt) {
  std::map<std::string, std::string> env;
  const auto lookup = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  env = {{"LOCO_HEALTH_PORT", "0"}, {"LOCO_METRICS_PORT", ""}, {"LOCO_PORT", "7000"}};
  EXPECT_TRUE(CheckSharedEnvironment(lookup).ok()) << "--port=0 overrides LOCO_PORT";
  env = {{"LOCO_HEALTH_PORT", "7556"}};
  Status s = CheckSharedEnvironment(lookup);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("LOCO_HEALTH_PORT=7556 is in the environment, which every process "
                             "loco-launch starts inherits: each would bind that port; unset it"),
            std::string::npos)
      << s.message();
  env = {{"LOCO_METRICS_PORT", "9100"}};
  EXPECT_NE(CheckSharedEnvironment(lookup).message().find("--prometheus"), std::string::npos);
  env = {{"LOCO_ADVERTISE_ADDRESS", "10.0.0.1:7001"}};
  EXPECT_NE(CheckSharedEnvironment(lookup).message().find("every server would advertise"),
            std::string::npos);
}

}  // namespace
}  // namespace loco

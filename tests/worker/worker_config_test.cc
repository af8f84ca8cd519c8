// loco-worker's settings: CheckWorkerConfig refuses the combinations no
// single flag's range can, naming the flag and what would be right, and
// ParseHiddenLayers reads --hidden.
#include "worker/worker_config.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "tests/common/map_environment.h"
#include "tests/common/says.h"
#include "worker/group/make_local_group.h"

namespace loco {
namespace {

// The settings loco-worker parses from `args` and the environment `env`
// (variable -> value; nothing else is set), and the FlagSet that parsed
// them (held where the settings are, which it points into).
struct ParsedWorker {
  WorkerConfig config;
  FlagSet flags{"loco-worker"};
};

std::unique_ptr<ParsedWorker> ParseWorker(const std::vector<std::string>& args,
                                          const std::map<std::string, std::string>& env = {}) {
  auto parsed = std::make_unique<ParsedWorker>();
  DefineWorkerFlags(parsed->flags, &parsed->config);
  bool help = false;
  const Status s = parsed->flags.Parse(args, MapEnvironment(env), &help);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return parsed;
}

// The settings as loco-worker parses `args`, with no environment, so that
// the defaults are the flags' own.
WorkerConfig Parsed(const std::vector<std::string>& args) { return ParseWorker(args)->config; }

// The message of CheckWorkerConfig's refusal of `args` (with `env`); empty
// when accepted.
std::string Refusal(const std::vector<std::string>& args,
                    const std::map<std::string, std::string>& env = {}) {
  const std::unique_ptr<ParsedWorker> parsed = ParseWorker(args, env);
  const Status s = CheckWorkerConfig(parsed->config, parsed->flags);
  if (s.ok()) return "";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_FALSE(s.message().empty());
  return s.message();
}

TEST(WorkerConfigTest, DefaultsPass) { EXPECT_EQ(Refusal({}), ""); }

TEST(WorkerConfigTest, GoodCombinationsPass) {
  EXPECT_EQ(Refusal({"--bits=2", "--error-bits=32", "--block-size=4096"}), "");
  EXPECT_EQ(Refusal({"--bits=8", "--push-chunk-bytes=4096"}), "");
  EXPECT_EQ(Refusal({"--model=charlm", "--lm-channels=96", "--lm-heads=3"}), "");
  EXPECT_EQ(Refusal({"--join-at-step=10"}), "");
  EXPECT_EQ(Refusal({"--wait-for-workers=4"}), "");
  EXPECT_EQ(Refusal({"--local-devices=2", "--local-group=cpu"}), "");
}

TEST(WorkerConfigTest, RefusesErrorBitsOtherThan8Or32) {
  EXPECT_TRUE(Says(Refusal({"--error-bits=16"}),
                   {"invalid value '16'", "--error-bits", "expected 8 or 32"}));
}

TEST(WorkerConfigTest, RefusesBitsOtherThan248) {
  for (const char* bits : {"3", "5", "6", "7"}) {
    EXPECT_TRUE(Says(Refusal({std::string("--bits=") + bits}),
                     {"invalid value '" + std::string(bits) + "'", "--bits",
                      "expected 2, 4 or 8"}));
  }
}

TEST(WorkerConfigTest, RefusesChannelsNotAMultipleOfHeads) {
  EXPECT_TRUE(
      Says(Refusal({"--lm-channels=100", "--lm-heads=8"}),
           {"invalid value '100'", "--lm-channels", "expected a multiple of --lm-heads 8"}));
}

TEST(WorkerConfigTest, RefusesJoinAtStepWithWaitForWorkers) {
  EXPECT_TRUE(Says(Refusal({"--join-at-step=5", "--wait-for-workers=2"}),
                   {"--join-at-step 5 and --wait-for-workers 2 contradict each other",
                    "a worker that joins later must not set it"}));
}

// With --steps the end of training is known before any data is loaded:
// --join-at-step at or past it was refused only once the data set had
// loaded; it is refused with the flags now. With --epochs the end depends
// on the data set's size, and loco-worker checks it once loaded.
TEST(WorkerConfigTest, RefusesJoinAtStepAtOrPastTheLastStep) {
  EXPECT_EQ(
      Refusal({"--join-at-step=5", "--steps=5"}),
      "invalid value '5' for --join-at-step: training ends at step 5, set by --steps; expected "
      "a step below it");
  EXPECT_TRUE(Says(Refusal({"--join-at-step=9", "--steps=5"}), {"ends at step 5"}));
  EXPECT_EQ(Refusal({"--join-at-step=4", "--steps=5"}), "");
  EXPECT_EQ(Refusal({"--join-at-step=100000", "--epochs=1"}), "");
  EXPECT_EQ(Refusal({"--steps=5"}, {{"LOCO_JOIN_AT_STEP", "7"}}),
            "invalid value '7' for $LOCO_JOIN_AT_STEP (for --join-at-step): training ends at "
            "step 5, set by --steps; expected a step below it");
}

// A refused value read from the environment is named by its variable and
// the flag it stands for; typed, the message is the flag's as before.
TEST(WorkerConfigTest, ARefusedEnvironmentValueIsNamedByItsVariable) {
  EXPECT_EQ(Refusal({}, {{"LOCO_BITS", "3"}}),
            "invalid value '3' for $LOCO_BITS (for --bits): expected 2, 4 or 8");
  EXPECT_EQ(Refusal({"--bits=3"}), "invalid value '3' for --bits: expected 2, 4 or 8");
  EXPECT_EQ(Refusal({}, {{"LOCO_ERROR_BITS", "16"}}),
            "invalid value '16' for $LOCO_ERROR_BITS (for --error-bits): expected 8 or 32");
  EXPECT_TRUE(Says(Refusal({}, {{"LOCO_BLOCK_SIZE", "100"}}),
                   {"invalid value '100' for $LOCO_BLOCK_SIZE (for --block-size)"}));
  EXPECT_TRUE(Says(Refusal({}, {{"LOCO_PUSH_CHUNK_BYTES", "100"}}),
                   {"'100' for $LOCO_PUSH_CHUNK_BYTES (for --push-chunk-bytes)"}));
  EXPECT_TRUE(Says(Refusal({"--lm-heads=8"}, {{"LOCO_LM_CHANNELS", "100"}}),
                   {"'100' for $LOCO_LM_CHANNELS (for --lm-channels): expected a multiple of "
                    "--lm-heads 8"}));
  EXPECT_TRUE(Says(Refusal({"--join-at-step=5"}, {{"LOCO_WAIT_FOR_WORKERS", "2"}}),
                   {"--join-at-step 5 and $LOCO_WAIT_FOR_WORKERS=2 (for --wait-for-workers) "
                    "contradict each other"}));
  EXPECT_TRUE(Says(Refusal({"--local-devices=2"}, {{"LOCO_LOCAL_GROUP", "nccl"}}),
                   {"$LOCO_LOCAL_GROUP=nccl (for --local-group) needs --device cuda"}));
  EXPECT_TRUE(Says(Refusal({"--model=charlm"}, {{"LOCO_DEVICE", "cuda"}}),
                   {"$LOCO_DEVICE=cuda (for --device) runs --model mlp only"}));
}

TEST(WorkerConfigTest, RefusesNcclWithoutCudaDevices) {
  EXPECT_TRUE(Says(Refusal({"--local-devices=2", "--local-group=nccl"}),
                   {"--local-group nccl needs --device cuda",
                    "use --local-group cpu or auto"}));
}

TEST(WorkerConfigTest, RefusesNcclInABuildWithoutIt) {
  if (HaveNcclLocalGroup()) GTEST_SKIP() << "this build has NCCL";
  // --device cuda passes its own checks only with a device; the NCCL check
  // comes first either way.
  EXPECT_TRUE(Says(Refusal({"--device=cuda", "--local-group=nccl"}),
                   {"--local-group nccl needs a build with NCCL",
                    "use --local-group cpu or auto"}));
}

TEST(WorkerConfigTest, RefusesDeviceCudaForTheCharLm) {
  EXPECT_TRUE(Says(Refusal({"--device=cuda", "--model=charlm"}),
                   {"--device cuda runs --model mlp only",
                    "use --device cpu with --model charlm"}));
}

TEST(WorkerConfigTest, RefusesDeviceCudaWithoutEnoughDevices) {
  const int devices = cuda::DeviceCount();
  EXPECT_TRUE(Says(Refusal({"--device=cuda", "--local-devices=" + std::to_string(devices + 1)}),
                   {"--device cuda with --local-devices " + std::to_string(devices + 1),
                    "needs that many CUDA devices", "use --device cpu or fewer --local-devices"}));
}

TEST(WorkerConfigTest, RefusesDeviceCudaOnAMachineWithoutOne) {
  if (cuda::DeviceCount() >= 1) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_TRUE(Says(Refusal({"--device=cuda", "--local-devices=1"}),
                   {"--device cuda with --local-devices 1 needs that many CUDA devices",
                    cuda::BuiltWithCuda() ? "found 0" : "this build has no CUDA support"}));
}

TEST(WorkerConfigTest, RefusesBlockSizeNotAMultipleOf32) {
  EXPECT_TRUE(Says(Refusal({"--block-size=100"}),
                   {"invalid value '100'", "--block-size",
                    "expected a multiple of 32 in [32, 4096]"}));
}

TEST(WorkerConfigTest, RefusesPushChunkBytesBelow4096ButNotZero) {
  EXPECT_TRUE(Says(Refusal({"--push-chunk-bytes=1000"}),
                   {"invalid value '1000'", "--push-chunk-bytes",
                    "expected 0 (one unary Push) or a size in [4096, 67108864]"}));
}

// --ready-granularity takes panel (the default) or tensor; another value,
// from the flag or the environment, is refused naming the flag and both.
TEST(WorkerConfigTest, ReadyGranularityTakesPanelOrTensor) {
  EXPECT_EQ(Parsed({}).ready_granularity, "panel");
  EXPECT_EQ(Parsed({"--ready-granularity=tensor"}).ready_granularity, "tensor");
  for (const char* env : {static_cast<const char*>(nullptr), "layer"}) {
    WorkerConfig c;
    FlagSet flags("loco-worker");
    DefineWorkerFlags(flags, &c);
    bool help = false;
    const std::vector<std::string> args =
        env ? std::vector<std::string>{} : std::vector<std::string>{"--ready-granularity=row"};
    const Status s = flags.Parse(
        args,
        [env](const char* name) -> const char* {
          return env && std::string(name) == "LOCO_READY_GRANULARITY" ? env : nullptr;
        },
        &help);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Says(s.message(), {env ? "LOCO_READY_GRANULARITY" : "--ready-granularity",
                                   "panel", "tensor"}));
  }
}

TEST(WorkerConfigTest, ParseHiddenLayersReadsSizes) {
  std::vector<size_t> hidden;
  ASSERT_TRUE(ParseHiddenLayers("1024,1024", &hidden).ok());
  EXPECT_EQ(hidden, (std::vector<size_t>{1024, 1024}));
  hidden.clear();
  ASSERT_TRUE(ParseHiddenLayers("96", &hidden).ok());
  EXPECT_EQ(hidden, (std::vector<size_t>{96}));
  hidden.clear();
  ASSERT_TRUE(ParseHiddenLayers("", &hidden).ok());  // no hidden layer: a linear model
  EXPECT_TRUE(hidden.empty());
}

// Sizes are decimal digits: strtoll took "+64" and " 64" as 64.
TEST(WorkerConfigTest, ParseHiddenLayersRefusesWhatIsNotASize) {
  for (const char* bad : {"0", "a,b", "1024,,1024", "-5", "2000000", "12x", "1024,", ",1024", "+64",
                          " 64", "64 ", "64, 64", "0x40", "99999999999999999999999"}) {
    std::vector<size_t> hidden;
    const Status s = ParseHiddenLayers(bad, &hidden);
    EXPECT_FALSE(s.ok()) << "'" << bad << "'";
    const std::string expected = "' for --hidden: expected positive layer sizes";
    EXPECT_TRUE(Says(s.message(), {"invalid value '" + std::string(bad) + expected})) << bad;
  }
  std::vector<size_t> hidden;
  EXPECT_TRUE(Says(ParseHiddenLayers("+64", &hidden, "$LOCO_HIDDEN (for --hidden)").message(),
                   {"invalid value '+64' for $LOCO_HIDDEN (for --hidden): expected positive"}));
}

// The MLP of --hidden on Fashion-MNIST: 784 inputs, 10 classes, a weight
// matrix and a bias vector per layer.
TEST(WorkerConfigTest, MlpParameterCountIsEveryWeightAndBias) {
  EXPECT_EQ(MlpParameterCount({}), 785u * 10);
  EXPECT_EQ(MlpParameterCount({1024, 1024}), 785u * 1024 + 1025u * 1024 + 1025u * 10);
  const uint64_t m = uint64_t{1} << 20;
  EXPECT_EQ(MlpParameterCount({m, m}), 785 * m + (m + 1) * m + (m + 1) * 10);
}

// --hidden=1048576,1048576 (1.1e12 parameters) ended the worker with an
// uncaught std::bad_alloc; an MLP whose parameters cannot fit the memory
// at 12 bytes each is refused, giving its count and the limit.
TEST(WorkerConfigTest, CheckMlpSizeRefusesAModelTheMemoryCannotHold) {
  const uint64_t gib = uint64_t{1} << 30;
  const std::vector<size_t> huge = {size_t{1} << 20, size_t{1} << 20};
  EXPECT_TRUE(Says(CheckMlpSize("1048576,1048576", huge, 64 * gib).message(),
                   {"invalid value '1048576,1048576' for --hidden: the MLP has " +
                        std::to_string(MlpParameterCount(huge)) + " parameters",
                    "this machine's 64 GiB of memory hold at most " +
                        std::to_string(64 * gib / kWorkerBytesPerParameter),
                    "12 bytes per parameter", "expected smaller layers"}));
  // The default model fits a small machine; an unknown memory checks nothing.
  EXPECT_TRUE(CheckMlpSize("1024,1024", {1024, 1024}, gib).ok());
  EXPECT_TRUE(CheckMlpSize("1048576,1048576", huge, 0).ok());
  // At the limit, and one parameter over it.
  const uint64_t count = MlpParameterCount({1024, 1024});
  EXPECT_TRUE(CheckMlpSize("1024,1024", {1024, 1024}, count * kWorkerBytesPerParameter).ok());
  EXPECT_FALSE(CheckMlpSize("1024,1024", {1024, 1024}, count * kWorkerBytesPerParameter - 1).ok());
  // No machine has the memory for this one.
  EXPECT_FALSE(CheckMlpSize("1048576,1048576", huge, PhysicalMemoryBytes()).ok());
}

// --coordinator is host:port with a port in [1, 65535], refused when parsed
// and named as the flag: gRPC would dial 99999 as 34463, and the worker
// refused "foo" only after loading its data, as WorkerOptions.coordinator.
TEST(WorkerConfigTest, CoordinatorIsHostAndPortInRange) {
  for (const char* bad : {"127.0.0.1:99999", "foo", "127.0.0.1:0", ":7000", "::1:7000"}) {
    WorkerConfig c;
    FlagSet flags("loco-worker");
    DefineWorkerFlags(flags, &c);
    bool help = false;
    const Status s = flags.Parse(
        {std::string("--coordinator=") + bad}, [](const char*) -> const char* { return nullptr; },
        &help);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(Says(s.message(),
                     {"loco-worker: invalid value '" + std::string(bad) + "' for --coordinator: ",
                      "host:port"}));
  }
  EXPECT_EQ(Parsed({"--coordinator=[::1]:7000"}).coordinator, "[::1]:7000");
  EXPECT_EQ(Parsed({"--coordinator=coordinator:7000"}).coordinator, "coordinator:7000");
}

}  // namespace
}  // namespace loco

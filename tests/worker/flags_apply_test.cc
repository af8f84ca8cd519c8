// CheckFlagsApply: a flag that loco-worker's model, device or step would
// ignore is refused when typed and noted when it comes from the
// environment; and the real binary exits 2 on the first and logs the second.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "data/fashion_mnist.h"
#include "tests/common/map_environment.h"
#include "tests/common/run_command.h"
#include "tests/common/says.h"
#include "worker/worker_config.h"

namespace loco {
namespace {

struct Applied {
  std::string refusal;  // empty when accepted
  std::vector<std::string> notes;
};

// CheckFlagsApply over the settings loco-worker parses from `args` and the
// environment `env` (variable -> value; nothing else is set).
Applied Apply(const std::vector<std::string>& args,
              const std::map<std::string, std::string>& env = {}) {
  WorkerConfig c;
  FlagSet flags("loco-worker");
  DefineWorkerFlags(flags, &c);
  bool help = false;
  const Status parsed = flags.Parse(args, MapEnvironment(env), &help);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString();
  Applied out;
  const Status s = CheckFlagsApply(c, flags, &out.notes);
  if (!s.ok()) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    out.refusal = s.message();
  }
  return out;
}

TEST(CheckFlagsApplyTest, AFlagTypedWhereItHasNoEffectIsRefusedSayingWhy) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> says;
  };
  const std::string mlp_only = "only --model mlp uses it (this run is --model charlm)";
  const std::string charlm_only = "only --model charlm uses it (this run is --model mlp)";
  const std::string cpu_only = "only --device cpu uses it";
  const std::string blocks_only = "only the block codecs (--codec naive, ef or loco) use it";
  const std::string fp32 = "--codec fp32 sends every element as a 32-bit float";
  const std::string state_only = "only the codecs with an error state (--codec ef or loco)";
  const std::string loco_only = "only --codec loco uses it; --codec ef is classic error feedback";
  const std::vector<Case> cases = {
      {{"--codec=fp32", "--bits=4"}, {"--bits has no effect here", blocks_only, fp32}},
      {{"--codec=bf16", "--bits=2"},
       {"--bits", blocks_only, "--codec bf16 sends every element rounded to bf16"}},
      {{"--codec=fp32", "--block-size=256"}, {"--block-size has no effect here", fp32}},
      {{"--codec=bf16", "--stochastic-rounding"}, {"--stochastic-rounding", blocks_only}},
      {{"--codec=fp32", "--error-bits=32"}, {"--error-bits", blocks_only, fp32}},
      {{"--codec=fp32", "--beta=0.9"}, {"--beta", blocks_only}},
      {{"--codec=bf16", "--reset-period=10"}, {"--reset-period", blocks_only}},
      {{"--codec=naive", "--error-bits=32"},
       {"--error-bits has no effect here", state_only, "--codec naive keeps none"}},
      {{"--codec=naive", "--beta=0.9"}, {"--beta", state_only}},
      {{"--codec=ef", "--beta=0.9"}, {"--beta has no effect here", loco_only}},
      {{"--codec=ef", "--reset-period=10"}, {"--reset-period", loco_only}},
      {{"--corpus-dir=/tmp"}, {"--corpus-dir has no effect here", charlm_only}},
      {{"--lm-layers=4"}, {"--lm-layers has no effect here", charlm_only}},
      {{"--lm-channels=64"}, {"--lm-channels", charlm_only}},
      {{"--lm-heads=2"}, {"--lm-heads", charlm_only}},
      {{"--lm-context=32"}, {"--lm-context", charlm_only}},
      {{"--eval-windows=8"}, {"--eval-windows", charlm_only}},
      {{"--model=charlm", "--hidden=64"}, {"--hidden has no effect here", mlp_only}},
      {{"--model=charlm", "--data-dir=/tmp"}, {"--data-dir", mlp_only}},
      {{"--model=charlm", "--cpu-products=openblas"}, {"--cpu-products", mlp_only}},
      {{"--model=charlm", "--ready-granularity=tensor"}, {"--ready-granularity", mlp_only}},
      {{"--device=cuda", "--cpu-products=auto"}, {"--cpu-products", cpu_only}},
      {{"--device=cuda", "--ready-granularity=panel"}, {"--ready-granularity", cpu_only}},
      {{"--overlap-backward=false", "--ready-granularity=tensor"},
       {"--ready-granularity", "only --overlap-backward uses it"}},
      {{"--local-devices=2", "--ready-granularity=tensor"},
       {"--ready-granularity", "with --local-devices 2", "one local device only"}},
      {{"--push-chunk-bytes=0", "--push-parts=false"},
       {"--push-parts has no effect here", "only a push sent as chunks uses it",
        "--push-chunk-bytes 0 sends one unary Push"}},
      {{"--model=charlm", "--push-parts"}, {"--push-parts", mlp_only}},
      {{"--overlap-backward=false", "--push-parts"},
       {"--push-parts", "only --overlap-backward uses it"}},
  };
  for (const Case& c : cases) {
    const Applied got = Apply(c.args);
    EXPECT_TRUE(Says(got.refusal, c.says)) << c.args.back();
    EXPECT_TRUE(Says(got.refusal, {"remove it"})) << c.args.back();
  }
}

// Typed where they take effect, or left at their defaults, none is refused;
// typing a flag's default value counts as typing it.
TEST(CheckFlagsApplyTest, FlagsThatTakeEffectPass) {
  const std::vector<std::vector<std::string>> accepted = {
      {},
      {"--codec=fp32"},
      {"--codec=loco", "--bits=2", "--block-size=64", "--beta=0.9", "--reset-period=8",
       "--error-bits=32", "--stochastic-rounding"},
      {"--bits=8", "--beta=0.5", "--reset-period=0", "--error-bits=8"},  // loco, the default
      {"--codec=ef", "--bits=8", "--block-size=128", "--error-bits=32", "--stochastic-rounding"},
      {"--codec=naive", "--bits=2", "--block-size=64", "--stochastic-rounding=false"},
      // With several local ranks, --block-size also aligns their slices.
      {"--codec=fp32", "--local-devices=2", "--block-size=64"},
      {"--model=charlm"},
      {"--ready-granularity=tensor"},
      {"--ready-granularity=panel", "--overlap-backward=true", "--local-devices=1"},
      {"--push-parts=false"},
      {"--push-chunk-bytes=4096", "--push-parts"},
      {"--hidden=64", "--data-dir=/tmp", "--cpu-products=openblas"},
      {"--device=cuda", "--hidden=64", "--data-dir=/tmp"},
      {"--local-devices=2", "--cpu-products=openblas"},
      {"--model=charlm", "--corpus-dir=/tmp", "--lm-layers=1", "--lm-channels=32", "--lm-heads=2",
       "--lm-context=16", "--eval-windows=8"},
  };
  for (const auto& args : accepted) {
    const Applied got = Apply(args);
    EXPECT_EQ(got.refusal, "") << (args.empty() ? "(defaults)" : args.back());
    EXPECT_TRUE(got.notes.empty()) << (args.empty() ? "(defaults)" : args.back());
  }
}

// From the environment, which several jobs may share, the same flags give a
// note each (in registration order), not a refusal; a typed one next to
// them is still refused.
TEST(CheckFlagsApplyTest, FromTheEnvironmentItIsANoteNotARefusal) {
  const std::map<std::string, std::string> env = {{"LOCO_LM_LAYERS", "4"},
                                                  {"LOCO_CORPUS_DIR", "/tmp"},
                                                  {"LOCO_READY_GRANULARITY", "tensor"}};
  const Applied got = Apply({"--overlap-backward=false"}, env);
  EXPECT_EQ(got.refusal, "");
  ASSERT_EQ(got.notes.size(), 3u);
  EXPECT_TRUE(Says(got.notes[0], {"$LOCO_CORPUS_DIR is set but has no effect here",
                                  "only --model charlm uses it"}));
  EXPECT_TRUE(Says(got.notes[1], {"$LOCO_LM_LAYERS is set but has no effect here"}));
  EXPECT_TRUE(Says(got.notes[2], {"$LOCO_READY_GRANULARITY", "only --overlap-backward uses it"}));
  EXPECT_TRUE(Says(Apply({"--eval-windows=8"}, env).refusal, {"--eval-windows"}));
  // Where they take effect, they say nothing.
  EXPECT_TRUE(Apply({"--model=charlm"}, {{"LOCO_LM_LAYERS", "4"}}).notes.empty());
  // A shared environment that sets the block codecs' settings for every
  // worker (deploy/k8s/base/config.yaml sets LOCO_BITS and LOCO_BLOCK_SIZE)
  // does not stop one typed --codec fp32 worker.
  const Applied fp32 = Apply({"--codec=fp32"}, {{"LOCO_BITS", "4"}, {"LOCO_BLOCK_SIZE", "256"}});
  EXPECT_EQ(fp32.refusal, "");
  ASSERT_EQ(fp32.notes.size(), 2u);
  EXPECT_TRUE(Says(fp32.notes[0], {"$LOCO_BITS is set but has no effect here",
                                   "--codec fp32 sends every element as a 32-bit float"}));
  EXPECT_TRUE(Says(fp32.notes[1], {"$LOCO_BLOCK_SIZE is set but has no effect here"}));
}

TEST(CheckFlagsApplyTest, TheFirstInRegistrationOrderIsNamed) {
  EXPECT_TRUE(Says(Apply({"--eval-windows=8", "--lm-heads=2", "--corpus-dir=/tmp"}).refusal,
                   {"--corpus-dir"}));
}

// The real binary, with `env` before it on the command line: its exit code
// and its output (both streams).
int RunWorker(const std::string& env, const std::string& args, std::string* output) {
  const std::string command = "env " + env + " timeout 30 " LOCO_BIN_DIR
                              "/loco-worker --insecure --coordinator=127.0.0.1:1 --steps=1 "
                              "--join-timeout-ms=200 --coordinator-outage-ms=0 "
                              "--data-dir=/nonexistent " +
                              args + " 2>&1";
  return RunCommand(command, output);
}

TEST(CheckFlagsApplyTest, TheWorkerExitsTwoOnATypedFlagAndLogsOneFromTheEnvironment) {
  std::string out;
  EXPECT_EQ(RunWorker("", "--lm-layers=4", &out), 2) << out;
  EXPECT_TRUE(Says(out, {"loco-worker: --lm-layers has no effect here"})) << out;
  // From the environment it only warns, and the worker goes on (to fail
  // later, on the missing data set: not a usage error).
  out.clear();
  const int code = RunWorker("LOCO_LM_LAYERS=4", "", &out);
  EXPECT_NE(code, 2) << out;
  EXPECT_NE(code, 0) << out;
  EXPECT_TRUE(Says(out, {"$LOCO_LM_LAYERS is set but has no effect here"})) << out;
}

// --check-flags: the same checks, then exit 0 without loading data (the
// data directory here does not exist) or dialling the coordinator.
TEST(CheckFlagsApplyTest, CheckFlagsValidatesAndStartsNothing) {
  std::string out;
  EXPECT_EQ(RunWorker("", "--check-flags", &out), 0) << out;
  EXPECT_TRUE(Says(out, {"loco-worker: the flags are valid"})) << out;
  EXPECT_FALSE(Says(out, {"dataset"})) << out;
  out.clear();
  EXPECT_EQ(RunWorker("", "--check-flags --model=charlm --hidden=64", &out), 2) << out;
  EXPECT_TRUE(Says(out, {"--hidden has no effect here"})) << out;
  out.clear();
  EXPECT_EQ(RunWorker("", "--check-flags --codec=bf16 --error-bits=32", &out), 2) << out;
  EXPECT_TRUE(Says(out, {"loco-worker: --error-bits has no effect here"})) << out;
  out.clear();
  EXPECT_EQ(RunWorker("", "--check-flags --tls-ca=/nonexistent/ca.pem", &out), 2) << out;
}

// A coordinator address with a port above 65535 (gRPC would dial 99999 as
// 34463) or without a port, and an MLP too large for the machine's memory
// (it ended the worker with std::bad_alloc, exit 134), are usage errors:
// exit 2 naming the flag, before anything is loaded.
TEST(CheckFlagsApplyTest, TheWorkerRefusesAnAddressOrModelItCannotUseAtOnce) {
  struct Case {
    std::string args;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {"--coordinator=127.0.0.1:99999",
       {"loco-worker: invalid value '127.0.0.1:99999' for --coordinator: the port 99999 is "
        "outside [1, 65535]"}},
      {"--coordinator=foo", {"invalid value 'foo' for --coordinator", "there is no port"}},
      {"--hidden=1048576,1048576",
       {"invalid value '1048576,1048576' for --hidden: the MLP has 1100346294282 parameters",
        "hold at most"}},
  };
  for (const Case& c : cases) {
    std::string out;
    EXPECT_EQ(RunWorker("", c.args, &out), 2) << c.args << "\n" << out;
    EXPECT_TRUE(Says(out, c.says)) << out;
  }
}

// Bad input changes nothing: a worker refused with exit 2 writes no trace,
// whether its flags refuse it (--join-at-step at or past --steps) or a check
// that needs the data set does (at or past the end of --epochs 1: 235 steps
// of batch 256).
TEST(CheckFlagsApplyTest, ARefusedWorkerWritesNoTrace) {
  if (::access((std::string(FashionMnist::kDefaultDir) + "/train-images-idx3-ubyte.gz").c_str(),
               R_OK) != 0) {
    GTEST_SKIP() << "no Fashion-MNIST in " << FashionMnist::kDefaultDir;
  }
  const std::string trace_dir =
      std::string(::testing::TempDir()) + "/refused-trace." + std::to_string(::getpid());
  for (const std::string& refused :
       {std::string("--coordinator=foo"), std::string("--join-at-step=5 --steps=2"),
        std::string("--join-at-step=235 --steps=0 --epochs=1 --global-batch=256")}) {
    std::string out;
    EXPECT_EQ(RunWorker("",
                        refused + " --hidden=8 --name=w1 --trace-dir=" + trace_dir +
                            "/x --data-dir=" + FashionMnist::kDefaultDir,
                        &out),
              2)
        << refused << "\n"
        << out;
    EXPECT_NE(::access(trace_dir.c_str(), F_OK), 0) << refused << ": " << trace_dir << " made";
  }
}

// The server's --check-flags: valid flags give exit 0 and no LISTENING
// line; a bad one gives exit 2 and the reason.
TEST(CheckFlagsApplyTest, TheServersCheckFlagsStartsNoServer) {
  std::string out;
  const std::string server = "timeout 30 " LOCO_BIN_DIR "/loco-server --insecure ";
  EXPECT_EQ(RunCommand(server + "--coordinator=127.0.0.1:1 --check-flags 2>&1", &out), 0) << out;
  EXPECT_TRUE(Says(out, {"loco-server: the flags are valid"})) << out;
  EXPECT_FALSE(Says(out, {"LISTENING"})) << out;
  out.clear();
  EXPECT_EQ(RunCommand(server + "--check-flags 2>&1", &out), 2) << out;
  EXPECT_TRUE(Says(out, {"--coordinator (or $LOCO_COORDINATOR) is required"})) << out;
}

}  // namespace
}  // namespace loco

// loco-plan's command line, in-process: each bad flag is refused with exit
// code 2 and a message naming it; a missing calibration file is exit 1; a
// prediction says which calibration file it used, and without --calibration
// it uses the one shipped beside the program, from any working directory.
#include "plan/plan_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "plan/calibration.h"

namespace loco::plan {
namespace {

struct Result {
  int exit_code = -1;
  std::string out, err;
};

Result RunPlan(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  Result r;
  r.exit_code = RunPlanCommand(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::string CalibrationFile() {
  const std::string path = std::string(::testing::TempDir()) + "/plan_cli." +
                           std::to_string(::getpid()) + ".txt";
  Calibration c;
  c.worker_s_per_param_sample = 3e-11;
  c.cpu_s_per_byte = 1e-9;
  c.link_efficiency = 0.95;
  c.source = "test";
  c.runs = 9;
  EXPECT_TRUE(WriteCalibrationFile(path, c).ok());
  return path;
}

std::string FileText(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(PlanCommandTest, RefusesEachBadFlagWithExitCodeTwoAndItsName) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--workers=0"}, "--workers"},
      {{"--workers=1025"}, "--workers"},
      {{"--params=1000"}, "--params"},
      {{"--params=2e11"}, "--params"},
      {{"--params=1234567.5"}, "--params"},
      {{"--bits=3"}, "--bits"},
      {{"--codec=fp32", "--bits=5"}, "--bits"},
      {{"--block=100"}, "--block"},
      {{"--pull-bits=6"}, "--pull-bits"},
      {{"--pull-block=33"}, "--pull-block"},
      {{"--codec=zstd"}, "--codec"},
      {{"--link-gbps=0"}, "--link-gbps"},
      {{"--shards=4096", "--params=1e6"}, "--shards"},
      {{"--gpus-per-node=8", "--shared-cores=2"}, "--shared-cores"},
      {{"--tolerance=2"}, "--tolerance"},
      {{"--shard-align=100"}, "--shard-align"},
      {{"--apply-threads=65"}, "--apply-threads"},
      {{"--apply-threads=-1"}, "--apply-threads"},
      {{"--format=xml"}, "--format"},
      {{"--no-such-flag=1"}, "--no-such-flag"},
      {{"positional"}, "positional"},
      {{"--mode=calibrate"}, "--write-calibration"},
  };
  for (const auto& [args, name] : cases) {
    Result r = RunPlan(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(name), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// A flag the other settings would ignore (--bits with --codec fp32, a
// cluster flag with --mode=calibrate, --measured with --mode=predict) was
// silently ignored: typed, it is refused naming it and why, before anything
// is read or written; from the environment, it is a note and the run goes on.
TEST(PlanCommandTest, AFlagTheOtherSettingsIgnoreIsRefusedWhenTyped) {
  const std::string calibration = "--calibration=" + CalibrationFile();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{calibration, "--codec=fp32", "--bits=2"},
       "--bits has no effect here: only --codec loco has codes and blocks (this plan is --codec "
       "fp32)"},
      {{calibration, "--codec=bf16", "--block=512"}, "--block has no effect here"},
      {{calibration, "--pull-codec=fp32", "--full-sync-every=10"},
       "--full-sync-every has no effect here: only --pull-codec delta"},
      {{calibration, "--measured=x.csv"},
       "--measured has no effect here: --mode=predict reads the constants of --calibration"},
      {{"--mode=calibrate", "--write-calibration=/nonexistent/out.txt", "--workers=8"},
       "--workers has no effect here: --mode=calibrate fits the runs of --measured"},
      {{"--mode=calibrate", "--write-calibration=/nonexistent/out.txt", "--pull-bits=4"},
       "--pull-bits has no effect here: --mode=calibrate"},
  };
  for (const auto& [args, says] : cases) {
    Result r = RunPlan(args);
    EXPECT_EQ(r.exit_code, 2) << args[1] << ": " << r.err;
    EXPECT_NE(r.err.find("loco-plan: " + says), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  // Where they apply, the same flags are taken.
  EXPECT_EQ(RunPlan({calibration, "--codec=loco", "--bits=2", "--block=512"}).exit_code, 0);
  ::setenv("LOCO_PLAN_BITS", "2", 1);
  Result r = RunPlan({calibration, "--codec=fp32"});
  ::unsetenv("LOCO_PLAN_BITS");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("loco-plan: $LOCO_PLAN_BITS is set but has no effect here"),
            std::string::npos)
      << r.err;
}

// --mode=calibrate reads --measured and writes --write-calibration: the
// same file under either name (itself, through "./", through a link) is
// refused with exit code 2 before anything is read or written, and the
// measured runs are left as they were.
TEST(PlanCommandTest, CalibrateRefusesToWriteOverTheMeasuredRuns) {
  const std::filesystem::path folder =
      std::filesystem::path(::testing::TempDir()) / ("plan_same." + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  const std::filesystem::path measured = folder / "measured.csv";
  std::filesystem::copy_file(LOCO_SOURCE_DIR "/bench/plan/measured.csv", measured);
  const std::string before = FileText(measured);
  std::filesystem::create_symlink(measured, folder / "link.csv");
  for (const std::filesystem::path& output :
       {measured, folder / "." / "measured.csv", folder / "link.csv"}) {
    Result r = RunPlan({"--mode=calibrate", "--measured=" + measured.string(),
                        "--write-calibration=" + output.string()});
    EXPECT_EQ(r.exit_code, 2) << output << ": " << r.err;
    EXPECT_NE(
        r.err.find("--write-calibration " + output.string() + " is the file --measured reads"),
        std::string::npos)
        << r.err;
    EXPECT_EQ(FileText(measured), before) << output;
  }
  // Another file is written, and the measured runs still are as they were.
  Result r = RunPlan({"--mode=calibrate", "--measured=" + measured.string(),
                      "--write-calibration=" + (folder / "calibration.txt").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FileText(measured), before);
  std::filesystem::remove_all(folder);
}

TEST(PlanCommandTest, AMissingCalibrationFileIsExitOneNamingIt) {
  Result r = RunPlan({"--calibration=/nonexistent/calibration.txt"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/calibration.txt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--calibration"), std::string::npos) << r.err;
}

TEST(PlanCommandTest, APredictionSaysWhichCalibrationItUsed) {
  const std::string path = CalibrationFile();
  Result text = RunPlan({"--calibration=" + path, "--params=7e9", "--workers=64",
                     "--gpus-per-node=8", "--link-gbps=100", "--compute-ms=400"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.rfind("calibration: " + path, 0), 0u) << text.out;
  for (const char* line : {"recommended shards:", "step time:", "bound by:", "wire bytes",
                           "server (largest shard):"}) {
    EXPECT_NE(text.out.find(line), std::string::npos) << line << "\n" << text.out;
  }
  Result json = RunPlan({"--calibration=" + path, "--shards=3", "--format=json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"calibration\": \"" + path + "\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"shards\": 3,"), std::string::npos) << json.out;
  ::unlink(path.c_str());
}

TEST(PlanCommandTest, WithoutACalibrationFlagItUsesTheOneShippedBesideTheProgram) {
  // The build puts it at <bin>/../share/loco-ps/plan/ (plan/CMakeLists.txt);
  // the working directory must not matter, so run from a folder without one.
  const std::filesystem::path shipped =
      std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() /
      "share/loco-ps/plan/calibration.txt";
  ASSERT_EQ(FileText(shipped), FileText(LOCO_SOURCE_DIR "/bench/plan/calibration.txt"))
      << shipped;
  const char* env = std::getenv("LOCO_PLAN_CALIBRATION");
  const std::string saved_env = env != nullptr ? env : "";
  ::unsetenv("LOCO_PLAN_CALIBRATION");
  const std::filesystem::path saved_cwd = std::filesystem::current_path();
  std::filesystem::current_path(::testing::TempDir());

  Result r = RunPlan({"--params=7e9", "--workers=64", "--format=json"});

  std::filesystem::current_path(saved_cwd);
  if (env != nullptr) ::setenv("LOCO_PLAN_CALIBRATION", saved_env.c_str(), 1);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"calibration\": \"" + shipped.string() + "\""), std::string::npos)
      << r.out;
}

TEST(PlanCommandTest, HelpAndConfigTableExitZero) {
  Result help = RunPlan({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--link-gbps"), std::string::npos);
  Result table = RunPlan({"--print-config-markdown"});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("| `loco-plan` | `--workers` | `LOCO_PLAN_WORKERS` |"),
            std::string::npos)
      << table.out;
}

}  // namespace
}  // namespace loco::plan

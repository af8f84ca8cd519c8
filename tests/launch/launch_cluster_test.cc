// loco-launch end to end, with real processes on loopback: the coordinator,
// the servers and the workers are the project's binaries.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "common/adamw_limits.h"
#include "common/format_double.h"
#include "launch/child_process.h"
#include "launch/flat_json.h"

namespace loco {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The kernel paths a worker on this CPU should log, from the kernel's own
// list of CPU flags (/proc/cpuinfo), not from the code that picks them:
// {compress path, start of the small-batch products' description}.
std::pair<std::string, std::string> ExpectedKernelPaths() {
  const std::string cpuinfo = ReadFile("/proc/cpuinfo");
  const size_t line = cpuinfo.find("\nflags");
  const std::string flags = line == std::string::npos
                                ? ""
                                : cpuinfo.substr(line, cpuinfo.find('\n', line + 1) - line) + " ";
  auto has = [&](const char* flag) {
    return flags.find(std::string(" ") + flag + " ") != std::string::npos;
  };
  const bool avx512 =
      has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq") && has("fma");
  const bool avx2 = has("avx2") && has("fma");
  if (avx512) {
    return {has("avx512vbmi") && has("avx512_vnni") ? "avx512-icl" : "avx512",
            "avx512 (a forward of at most 8 rows on "};
  }
  if (avx2) return {"avx2", "avx2 for batches of at most 32 rows"};
  return {"portable", "none on this CPU"};
}

std::string Tmp(const std::string& name) {
  return std::string(::testing::TempDir()) + "/" + name + "." + std::to_string(::getpid());
}

// The program `binary` of the build with `args`, its stderr in Tmp(name +
// ".stderr"); what it printed and how it ended (killed after timeout_s).
RunResult RunBinary(const std::string& binary, const std::vector<std::string>& args,
                    const std::string& name, int timeout_s) {
  std::vector<std::string> argv = {std::string(LOCO_BIN_DIR) + "/" + binary};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess child(name, argv, Tmp(name + ".stderr"));
  RunResult r;
  if (!child.Start().ok()) return r;
  std::vector<std::string> lines;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (!child.Poll() && std::chrono::steady_clock::now() < deadline) {
    child.ReadLines(&lines);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!child.exited()) child.Stop(10000);
  child.ReadLines(&lines);
  for (auto& l : lines) r.out += l + "\n";
  r.err = ReadFile(child.log_path());
  r.exit_code = child.exit_code();
  return r;
}

RunResult RunLaunch(const std::string& name, std::vector<std::string> args, int timeout_s) {
  std::vector<std::string> argv = {"--log-dir=" + Tmp(name + "-logs"), "--progress=plain",
                                   "--progress-period-ms=1000"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunBinary("loco-launch", argv, name, timeout_s);
}

// Two workers and two servers train the MLP on the real Fashion-MNIST for
// 200 steps with 4-bit LoCo: the loss must fall and the push traffic must be
// close to 1/8 of fp32 (4-bit codes plus one fp32 scale per 256 elements,
// the default block).
TEST(LaunchCluster, FashionMnistLossDecreasesOver200Steps) {
  std::string summary = Tmp("summary.json");
  RunResult r = RunLaunch("train", {"--servers=2", "--workers=2", "--steps=200", "--hidden=256",
                                    "--codec=loco", "--bits=4", "--summary-json=" + summary},
                          240);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto s = ParseFlatJson(ReadFile(summary));
  ASSERT_TRUE(s.has_value()) << ReadFile(summary);
  EXPECT_EQ(JsonNumber(*s, "steps", 0), 200);
  double first = JsonNumber(*s, "first_loss", 0), last = JsonNumber(*s, "final_loss", 99);
  EXPECT_GT(first, 0.0);
  EXPECT_LT(last, 0.7 * first) << "loss went from " << first << " to " << last;
  EXPECT_GT(JsonNumber(*s, "test_accuracy", 0), 0.70);
  double wire = JsonNumber(*s, "push_wire_bytes", 0), fp32 = JsonNumber(*s, "push_fp32_bytes", 0);
  ASSERT_GT(wire, 0);
  // 4-bit codes + a 4-byte scale per 256 elements: 0.5 + 4/256 bytes vs 4.
  EXPECT_NEAR(fp32 / wire, 4.0 / (0.5 + 4.0 / 256), 0.1);
  EXPECT_NE(r.out.find("test accuracy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("saved"), std::string::npos) << r.out;
  // The last progress line says how the run ended: both workers finished,
  // at the rate they last reported (not the 0 of no worker running).
  const size_t last_step = r.out.rfind("step 200/200");
  ASSERT_NE(last_step, std::string::npos) << r.out;
  const std::string last_line = r.out.substr(last_step, r.out.find('\n', last_step) - last_step);
  EXPECT_NE(last_line.find("workers 2"), std::string::npos) << last_line;
  EXPECT_EQ(last_line.find("samples/s 0 "), std::string::npos) << last_line;
  // A worker whose OpenBLAS kernels are narrower than the CPU's vectors
  // says so in its log (common/blas_advice.h decides); the launcher shows
  // it on its own output, once for all workers, and says nothing otherwise.
  const std::string worker_log = ReadFile(Tmp("train-logs") + "/worker-0.log");
  ASSERT_NE(worker_log.find("OpenBLAS "), std::string::npos) << worker_log;
  // And which of LoCo-PS's own paths it takes, as this CPU's flags say.
  const auto [compress, products] = ExpectedKernelPaths();
  EXPECT_NE(worker_log.find("LoCo-PS kernels: compress " + compress + "; small-batch products " +
                            products),
            std::string::npos)
      << "expected compress " << compress << ", products " << products << ":\n"
      << worker_log;
  const bool advised = worker_log.find("OpenBLAS runs its") != std::string::npos;
  const std::string note = "note: on the workers, OpenBLAS runs its";
  const size_t at = r.out.find(note);
  EXPECT_EQ(at != std::string::npos, advised) << r.out;
  if (at != std::string::npos) {
    EXPECT_EQ(r.out.find(note, at + 1), std::string::npos) << "shown twice:\n" << r.out;
    EXPECT_NE(r.out.find("OPENBLAS_CORETYPE="), std::string::npos) << r.out;
  }
}

// A worker that cannot start (no dataset at the given path) makes the whole
// run fail with a message naming the child and why.
TEST(LaunchCluster, ChildThatExitsEarlyFailsTheRunAndIsNamed) {
  RunResult r = RunLaunch("early", {"--servers=1", "--workers=2", "--steps=5",
                                    "--data-dir=/nonexistent/fashion-mnist"},
                          120);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("worker-"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited early"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("dataset-fashion-mnist"), std::string::npos) << r.err;
}

// The MLP's --hidden reaches the workers as the user gave it: typed, it is
// typed for them too, and a charlm worker refuses it (the run fails, naming
// why); from LOCO_HIDDEN, the workers inherit the environment value, which a
// charlm worker only warns about, and the run trains.
TEST(LaunchCluster, WorkerSettingFromTheEnvironmentStaysAnEnvironmentValue) {
  const std::vector<std::string> charlm = {
      "--servers=1", "--workers=1", "--steps=3", "--global-batch=8",
      "--worker-args=--model=charlm --lm-layers=1 --lm-channels=16 --lm-heads=2 --lm-context=16"};
  std::vector<std::string> typed = charlm;
  typed.push_back("--hidden=32");
  RunResult r = RunLaunch("hidden-typed", typed, 60);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("loco-worker refuses them: --hidden has no effect here: only --model mlp "
                       "uses it"),
            std::string::npos)
      << r.err;

  ASSERT_EQ(::setenv("LOCO_HIDDEN", "32", 1), 0);
  r = RunLaunch("hidden-env", charlm, 60);
  ::unsetenv("LOCO_HIDDEN");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("finished 3 steps"), std::string::npos) << r.out;
  EXPECT_NE(ReadFile(Tmp("hidden-env-logs") + "/worker-0.log")
                .find("$LOCO_HIDDEN is set but has no effect here"),
            std::string::npos);
}

// A flag a server or a worker would refuse (here a typo in --worker-args,
// an unknown one in --server-args) is a usage error of loco-launch (exit 2)
// with the child's reason, found before anything starts: the log folder is
// not even made (nor announced), so no coordinator, server or worker log is
// written.
TEST(LaunchCluster, FlagsAChildWouldRefuseAreAUsageErrorBeforeAnythingStarts) {
  struct Case {
    const char* name;
    const char* child_args;
    const char* says;
  };
  for (const Case& c : {Case{"typo-worker", "--worker-args=--modle=charlm",
                             "the workers' flags (loco-launch's and --worker-args): loco-worker "
                             "refuses them: unknown flag --modle"},
                        Case{"typo-server", "--server-args=--checkpoint-evry=5",
                             "the servers' flags (loco-launch's and --server-args): loco-server "
                             "refuses them: unknown flag --checkpoint-evry"}}) {
    const RunResult r =
        RunLaunch(c.name, {"--servers=1", "--workers=1", "--steps=3", c.child_args}, 60);
    EXPECT_EQ(r.exit_code, 2) << c.name << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    for (const char* log : {"coordinator.log", "server-0.log", "worker-0.log"}) {
      const std::string path = Tmp(std::string(c.name) + "-logs") + "/" + log;
      EXPECT_NE(::access(path.c_str(), F_OK), 0) << path;
    }
    const std::string log_dir = Tmp(std::string(c.name) + "-logs");
    EXPECT_NE(::access(log_dir.c_str(), F_OK), 0) << log_dir;
    EXPECT_EQ(r.out.find("logs in"), std::string::npos) << r.out;
  }
}

// --summary-json names a file the end of the run writes: one that could not
// be written (its folder missing, or a folder itself) is refused before
// anything starts, naming the flag and why, and no file is made.
TEST(LaunchCluster, SummaryJsonThatCannotBeWrittenIsRefusedBeforeAnythingStarts) {
  const std::string folder = Tmp("summary-folder");
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0);
  const std::string missing = Tmp("summary-missing") + "/s.json";
  struct Case {
    std::string path, says;
  };
  for (const Case& c : {Case{missing, "its folder " + Tmp("summary-missing") + " does not exist"},
                        Case{folder, "it is a folder; expected a file path"}}) {
    const RunResult r = RunLaunch("summary-refused", {"--summary-json=" + c.path}, 30);
    EXPECT_EQ(r.exit_code, 2) << c.path << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find("invalid value '" + c.path + "' for --summary-json: " + c.says),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out.find("logs in"), std::string::npos) << r.out;
  }
  EXPECT_NE(::access(missing.c_str(), F_OK), 0);
  EXPECT_NE(::access(Tmp("summary-missing").c_str(), F_OK), 0);
  EXPECT_EQ(::rmdir(folder.c_str()), 0) << "something was written into " << folder;
}

// The coordinator takes a heartbeat timeout only above its heartbeat
// interval (1000 ms by default, which loco-launch leaves): loco-launch
// refuses a lower one itself, before anything starts, saying why.
TEST(LaunchCluster, HeartbeatTimeoutTheCoordinatorWouldRefuseIsRefused) {
  for (const char* timeout : {"1000", "500"}) {
    const RunResult r =
        RunLaunch("heartbeat-low", {std::string("--heartbeat-timeout-ms=") + timeout}, 30);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("invalid value '" + std::string(timeout) +
                         "' for --heartbeat-timeout-ms: the workers heartbeat every 1000 ms"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("expected an integer in [1001, 600000]"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("logs in"), std::string::npos) << r.out;
  }
}

TEST(LaunchCluster, InvalidFlagIsRefusedWithWhatWouldBeValid) {
  RunResult r = RunLaunch("badflag", {"--codec=int3"}, 30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("fp32|bf16|naive|ef|loco"), std::string::npos) << r.err;
  r = RunLaunch("badbits", {"--bits=3"}, 30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("2, 4 or 8"), std::string::npos) << r.err;
  // The workers would ignore --bits and --block-size with fp32 or bf16 (and
  // refuse them typed): loco-launch refuses them there itself.
  r = RunLaunch("fp32bits", {"--codec=fp32", "--bits=4"}, 30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("loco-launch: --bits has no effect here: only the block codecs (--codec "
                       "naive, ef or loco) use it; --codec fp32 sends every element at full "
                       "precision"),
            std::string::npos)
      << r.err;
  r = RunLaunch("bf16block", {"--codec=bf16", "--block-size=128"}, 30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--block-size has no effect here"), std::string::npos) << r.err;
  r = RunLaunch("badbindir", {"--bin-dir=/nonexistent/bin"}, 30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--bin-dir /nonexistent/bin, has no loco-coordinator"), std::string::npos)
      << r.err;
}

// loco-launch hands --lr to every loco-server, so both take it in one range
// (common/adamw_limits.h), checked on the float the servers compute with:
// just above it (the next float), at 0 and at what rounds to 0, each
// refuses it before starting anything, naming the range; at its top,
// loco-server takes it.
TEST(LaunchCluster, LearningRateOutsideTheSharedRangeIsRefusedByLaunchAndServer) {
  const std::string range =
      "(" + FormatFloat(kLearningRateRange.min) + ", " + FormatFloat(kLearningRateRange.max) + "]";
  EXPECT_EQ(range, "(0, 10]");
  const float above = std::nextafter(kLearningRateRange.max, 2 * kLearningRateRange.max);
  for (const std::string& lr : {FormatFloat(above), std::string("0"), std::string("1e-300")}) {
    RunResult launch = RunLaunch("lr-outside", {"--lr=" + lr}, 30);
    EXPECT_EQ(launch.exit_code, 2) << lr << "\n" << launch.out << launch.err;
    EXPECT_NE(launch.err.find("invalid value '" + lr + "' for --lr: expected a number in " + range),
              std::string::npos)
        << launch.err;
    RunResult server = RunBinary("loco-server", {"--lr=" + lr, "--coordinator=127.0.0.1:1"},
                                 "lr-outside-server", 30);
    EXPECT_EQ(server.exit_code, 2) << lr << "\n" << server.err;
    EXPECT_NE(server.err.find("invalid value '" + lr + "' for --lr: expected a number in " + range),
              std::string::npos)
        << server.err;
  }
  // Without --coordinator the server refuses to start for that reason only.
  RunResult server = RunBinary("loco-server", {"--lr=" + FormatFloat(kLearningRateRange.max)},
                               "lr-max-server", 30);
  EXPECT_EQ(server.exit_code, 2) << server.err;
  EXPECT_EQ(server.err.find("--lr"), std::string::npos) << server.err;
  EXPECT_NE(server.err.find("--coordinator"), std::string::npos) << server.err;
}

// With role tokens (--worker-token-file, --server-token-file) the real
// programs separate the roles: the workers present the worker token and
// their Join tickets on every shard call, the servers the server token, and
// the run trains. Nobody warns that roles are not separated.
TEST(LaunchCluster, RoleTokensSeparateTheRolesAndTheWorkersTrainWithTheirTickets) {
  const std::string worker_token = Tmp("roles-worker.token");
  const std::string server_token = Tmp("roles-server.token");
  std::ofstream(worker_token) << "worker-secret-for-launch\n";
  std::ofstream(server_token) << "server-secret-for-launch\n";
  const std::string summary = Tmp("roles-summary.json");
  RunResult r = RunLaunch("roles",
                          {"--servers=2", "--workers=2", "--steps=5", "--hidden=32",
                           "--global-batch=32", "--worker-token-file=" + worker_token,
                           "--server-token-file=" + server_token, "--summary-json=" + summary},
                          120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto s = ParseFlatJson(ReadFile(summary));
  ASSERT_TRUE(s.has_value()) << ReadFile(summary);
  EXPECT_EQ(JsonNumber(*s, "steps", 0), 5);
  const std::string logs = Tmp("roles-logs");
  for (const std::string log : {"coordinator.log", "server-0.log", "server-1.log"}) {
    const std::string text = ReadFile(logs + "/" + log);
    ASSERT_FALSE(text.empty()) << log;
    EXPECT_EQ(text.find("roles are not separated"), std::string::npos) << log << ":\n" << text;
    EXPECT_EQ(text.find("PERMISSION_DENIED"), std::string::npos) << log << ":\n" << text;
  }
  for (const std::string log : {"server-0.log", "server-1.log"}) {
    const std::string text = ReadFile(logs + "/" + log);
    EXPECT_NE(text.find("shard calls need their worker's ticket"), std::string::npos)
        << log << ":\n"
        << text;
  }
}

std::string Curl(const std::string& url) {
  ChildProcess c("curl", {"/usr/bin/curl", "-s", "--max-time", "5", "-w", "\\n", url}, Tmp("curl.stderr"));
  if (!c.Start().ok()) return "";
  std::vector<std::string> lines;
  for (int i = 0; i < 300 && !c.Poll(); ++i) {
    c.ReadLines(&lines);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  c.ReadLines(&lines);
  std::string out;
  for (auto& l : lines) out += l;
  return out;
}

// The first `count` lines a started child prints, or fewer when it exits or
// 30 s pass first.
std::vector<std::string> FirstLines(ChildProcess& child, size_t count) {
  std::vector<std::string> lines;
  for (int i = 0; i < 60 && lines.size() < count && !child.Poll(); ++i) {
    if (auto line = child.WaitLine(500)) lines.push_back(*line);
  }
  return lines;
}

// --metrics-port=-1 (what loco-launch gives its children): the coordinator
// and the server each bind a free port the system picks, announce it as
// "METRICS host:port" after "LISTENING host:port", and serve /metrics
// there, so that no supervisor has to pick a port another process could
// take before the child binds it.
TEST(LaunchCluster, AMetricsPortOfMinusOneIsAFreePortAnnouncedOnStdout) {
  if (::access("/usr/bin/curl", X_OK) != 0) {
    GTEST_SKIP() << "needs curl (scripts/install-deps.sh installs it)";
  }
  ChildProcess coordinator("coordinator",
                           {std::string(LOCO_BIN_DIR) + "/loco-coordinator", "--port=0",
                            "--insecure", "--num-servers=1", "--metrics-port=-1"},
                           Tmp("any-port-coordinator.log"));
  ASSERT_TRUE(coordinator.Start().ok());
  std::vector<std::string> lines = FirstLines(coordinator, 2);
  ASSERT_EQ(lines.size(), 2u) << coordinator.LogTail(10);
  ASSERT_EQ(lines[0].rfind("LISTENING 127.0.0.1:", 0), 0u) << lines[0];
  const std::string coordinator_address = lines[0].substr(10);
  ASSERT_EQ(lines[1].rfind("METRICS 127.0.0.1:", 0), 0u) << lines[1];
  const std::string coordinator_metrics = lines[1].substr(8);

  ChildProcess server(
      "server",
      {std::string(LOCO_BIN_DIR) + "/loco-server", "--port=0", "--insecure", "--shard-id=0",
       "--num-servers=1", "--metrics-port=-1", "--coordinator=" + coordinator_address},
      Tmp("any-port-server.log"));
  ASSERT_TRUE(server.Start().ok());
  lines = FirstLines(server, 2);
  ASSERT_EQ(lines.size(), 2u) << server.LogTail(10);
  ASSERT_EQ(lines[1].rfind("METRICS 127.0.0.1:", 0), 0u) << lines[1];
  const std::string server_metrics = lines[1].substr(8);

  for (const std::string& address : {coordinator_metrics, server_metrics}) {
    const int port = std::atoi(address.substr(address.rfind(':') + 1).c_str());
    EXPECT_GT(port, 0) << address;
    EXPECT_LE(port, 65535) << address;
  }
  EXPECT_NE(coordinator_metrics, server_metrics);
  EXPECT_NE(Curl("http://" + coordinator_metrics + "/metrics").find("loco_coordinator_"),
            std::string::npos)
      << coordinator_metrics;
  EXPECT_NE(Curl("http://" + server_metrics + "/metrics").find("loco_server_"), std::string::npos)
      << server_metrics;
  server.Stop(10000);
  coordinator.Stop(10000);
  EXPECT_EQ(server.exit_code(), 0) << server.LogTail(10);
  EXPECT_EQ(coordinator.exit_code(), 0) << coordinator.LogTail(10);
}

// --prometheus starts a real Prometheus that scrapes every process of the
// run (coordinator, 1 server, 2 workers: 4 targets up) and sees the byte
// counters grow; Ctrl-C (SIGINT) then stops everything and exits 130.
TEST(LaunchCluster, LocalPrometheusScrapesEveryProcessAndCtrlCStopsAll) {
  if (::access("/usr/bin/prometheus", X_OK) != 0 || ::access("/usr/bin/curl", X_OK) != 0) {
    GTEST_SKIP() << "needs Debian's prometheus and curl (scripts/install-deps.sh installs them)";
  }
  std::vector<std::string> argv = {std::string(LOCO_BIN_DIR) + "/loco-launch",
                                   "--log-dir=" + Tmp("prom-logs"), "--progress=none",
                                   "--prometheus", "--servers=1", "--workers=2",
                                   "--steps=1000000", "--hidden=32"};
  ChildProcess launch("prom", argv, Tmp("prom.stderr"));
  ASSERT_TRUE(launch.Start().ok());
  std::string url;
  for (int i = 0; i < 60 && url.empty(); ++i) {
    auto line = launch.WaitLine(1000);
    if (line && line->rfind("prometheus: http://", 0) == 0) {
      url = line->substr(12, line->find(' ', 12) - 12);
    }
    ASSERT_FALSE(launch.exited()) << ReadFile(launch.log_path());
  }
  ASSERT_FALSE(url.empty()) << ReadFile(launch.log_path());
  std::string up, bytes;
  bool scraped = false;
  for (int i = 0; i < 60 && !scraped; ++i) {  // Prometheus scrapes every 2 s
    std::this_thread::sleep_for(std::chrono::seconds(1));
    up = Curl(url + "/api/v1/query?query=count(up==1)");
    bytes = Curl(url + "/api/v1/query?query=sum(loco_server_wire_bytes_total)>0");
    scraped = up.find("\"4\"]") != std::string::npos &&
              bytes.find("\"result\":[{") != std::string::npos;
  }
  EXPECT_TRUE(scraped) << "up: " << up << "\nbytes: " << bytes;
  launch.Signal(SIGINT);
  for (int i = 0; i < 600 && !launch.Poll(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(launch.exited()) << "loco-launch did not stop within 30 s of SIGINT";
  EXPECT_EQ(launch.exit_code(), 130);
  EXPECT_NE(ReadFile(launch.log_path()).find("interrupted"), std::string::npos);
}

// Every setting of every binary is listed in the README's configuration
// table, in the order the binary prints them (the table is generated by
// scripts/config-table.sh; a hand edit that reorders it is caught here).
TEST(LaunchCluster, ReadmeConfigurationTableListsEverySetting) {
  std::string readme = ReadFile(std::string(LOCO_SOURCE_DIR) + "/README.md");
  for (const char* bin : {"loco-launch", "loco-coordinator", "loco-server", "loco-worker",
                          "loco-health-probe", "loco-plan"}) {
    RunResult r;
    ChildProcess c(bin, {std::string(LOCO_BIN_DIR) + "/" + bin, "--print-config-markdown"},
                   Tmp(std::string(bin) + ".md.stderr"));
    ASSERT_TRUE(c.Start().ok());
    std::vector<std::string> rows;
    for (int i = 0; i < 200 && !c.Poll(); ++i) {
      c.ReadLines(&rows);
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    c.ReadLines(&rows);
    ASSERT_EQ(c.exit_code(), 0) << bin;
    ASSERT_FALSE(rows.empty()) << bin;
    std::string block;
    for (const auto& row : rows) {
      EXPECT_NE(readme.find(row), std::string::npos)
          << "README.md lacks the row (run scripts/config-table.sh):\n" << row;
      block += row + "\n";
    }
    EXPECT_NE(readme.find(block), std::string::npos)
        << "README.md's rows of " << bin << " are not the block it prints, in its order "
        << "(run scripts/config-table.sh)";
  }
}

}  // namespace
}  // namespace loco

#include "tests/fault/process_checks.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace loco::test {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void ExpectConsistent(ProcessCluster& c, uint64_t steps) {
  std::vector<uint64_t> versions;
  ASSERT_TRUE(c.ShardVersions(&versions));
  for (size_t k = 0; k < versions.size(); ++k) {
    EXPECT_EQ(versions[k], steps) << "shard " << k << " disagrees on the step";
  }
  std::string crc;
  ASSERT_TRUE(c.ServerParamsCrc(&crc));
  int finished = 0;
  for (size_t i = 0; i < c.num_workers(); ++i) {
    const FlatJson* done = c.worker(i).Find("done");
    if (done == nullptr) continue;
    ++finished;
    EXPECT_EQ(JsonNumber(*done, "steps", 0), double(steps)) << "worker-" << i;
    EXPECT_EQ(done->at("params_crc"), crc) << "worker-" << i << "'s copy differs from the servers'";
  }
  EXPECT_GT(finished, 0) << "no worker finished";
}

std::string CrcAtStep(const WorkerProcess& w, uint64_t step) {
  const FlatJson* e = w.Find("step", "step", std::to_string(step));
  return e != nullptr && e->count("params_crc") ? e->at("params_crc") : "";
}

bool EveryWorkerReported(ProcessCluster& c) {
  for (size_t i = 0; i < c.num_workers(); ++i) {
    if (c.worker(i).Find("step") == nullptr) return false;
  }
  return true;
}

LaunchResult RunLaunch(const std::string& name, std::vector<std::string> args,
                       std::chrono::seconds timeout) {
  const std::string base = std::string(::testing::TempDir()) + "/fault-launch-" + name + "-" +
                           std::to_string(::getpid());
  std::vector<std::string> argv = {std::string(LOCO_BIN_DIR) + "/loco-launch",
                                   "--log-dir=" + base, "--progress=none", "--hidden=64",
                                   "--global-batch=128"};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess launch(name, argv, base + ".stderr");
  LaunchResult r;
  r.log_dir = base;
  if (!launch.Start().ok()) return r;
  std::vector<std::string> lines;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!launch.Poll() && std::chrono::steady_clock::now() < deadline) {
    launch.ReadLines(&lines);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!launch.exited()) launch.Stop(10000);
  launch.ReadLines(&lines);
  for (auto& l : lines) r.out += l + "\n";
  r.err = ReadFile(launch.log_path());
  r.exit_code = launch.exit_code();
  return r;
}

}  // namespace loco::test

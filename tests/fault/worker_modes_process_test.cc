// loco-worker's own ways through a step, as real processes on loopback:
// each option that changes when the gradient goes out or how the answer
// comes back must leave the training bit for bit the same. One worker, so
// that nothing but the option differs between the runs (with several, the
// order in which their pushes arrive is the machine's).
//
// The comparison is the CRC-32 of the worker's whole fp32 copy after every
// step (--report-params-crc), against a run with the defaults: the gradient
// pushed part by part during the backward pass (--overlap-backward), one
// shard at a time, the last first (--ordered-pushes), and each step's pull
// as a stream answered in parts (--pull-parts).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/fault/process_cluster.h"

namespace loco::test {
namespace {

using std::chrono::seconds;

constexpr uint64_t kSteps = 8;

// Runs one worker for kSteps and returns the params_crc of the copy each
// step's gradient was computed at (steps 0 .. kSteps - 1), then that of its
// final copy (empty on failure, with the reason added to the test).
std::vector<std::string> CrcsOfARun(const std::string& name,
                                    const std::vector<std::string>& worker_args) {
  ProcessClusterOptions o;
  o.name = name;
  o.servers = 2;
  o.workers = 1;
  o.steps = kSteps;
  o.hidden = "96,64";
  o.global_batch = 64;
  o.pull_codec = "delta";
  o.worker_args = worker_args;
  ProcessCluster c(o);
  std::vector<std::string> crcs;
  if (!c.Start()) {
    ADD_FAILURE() << name << ": the cluster did not start\n" << c.Logs();
    return crcs;
  }
  if (!c.WaitForWorkersToExit(seconds(90)) || c.worker(0).child->exit_code() != 0) {
    ADD_FAILURE() << name << ": the worker did not finish cleanly\n" << c.Logs();
    return crcs;
  }
  for (uint64_t s = 0; s < kSteps; ++s) {
    const FlatJson* e = c.worker(0).Find("step", "step", std::to_string(s));
    if (e == nullptr || !e->count("params_crc")) {
      ADD_FAILURE() << name << ": no params_crc for step " << s << "\n" << c.Logs();
      return {};
    }
    crcs.push_back(e->at("params_crc"));
  }
  const FlatJson* done = c.worker(0).Find("done");
  if (done == nullptr || !done->count("params_crc")) {
    ADD_FAILURE() << name << ": no final params_crc\n" << c.Logs();
    return {};
  }
  crcs.push_back(done->at("params_crc"));
  return crcs;
}

TEST(WorkerModes, EveryWayThroughAStepTrainsBitForBitAlike) {
  const std::vector<std::string> plain = CrcsOfARun("modes-default", {});
  ASSERT_EQ(plain.size(), kSteps + 1);
  // The parameters move every step: equal CRCs below mean equal training,
  // not a model that stood still.
  for (size_t s = 1; s < plain.size(); ++s) {
    EXPECT_NE(plain[s], plain[s - 1]) << "step " << s - 1 << " changed nothing";
  }
  const std::vector<std::vector<std::string>> variants = {
      {"--overlap-backward=false"},  // the whole gradient first, then the pushes
      {"--pull-parts=false"},        // unary pulls after the push
      {"--overlap-backward=false", "--pull-parts=false"},
      {"--ordered-pushes=false"},    // every shard's push at once
  };
  for (const auto& args : variants) {
    std::string name = "modes";
    for (const std::string& a : args) name += a.substr(1, a.find('=') - 1);
    const std::vector<std::string> got = CrcsOfARun(name, args);
    ASSERT_EQ(got.size(), kSteps + 1) << name;
    for (size_t s = 0; s <= kSteps; ++s) {
      EXPECT_EQ(got[s], plain[s]) << name << " differs from the defaults at step " << s;
    }
  }
}

}  // namespace
}  // namespace loco::test

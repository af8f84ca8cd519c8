// loco-worker ends on SIGTERM while its join still retries (the coordinator
// unreachable, which it would retry for --coordinator-outage-ms), and while
// it still loads its data: within seconds, exit code 0, saying so. The real
// binary, from a shell.
#include <gtest/gtest.h>

#include <string>

#include "tests/common/run_command.h"

namespace loco {
namespace {

TEST(WorkerSignalTest, SigtermWhileTheJoinRetriesEndsTheWorkerInSeconds) {
  const std::string log = ::testing::TempDir() + "/signal_test_worker.log";
  // Port 1 on loopback refuses connections: the join retries (5 min by
  // default). Once the log shows a retry, SIGTERM, and time the exit.
  const std::string command =
      "log=" + log + "; " LOCO_BIN_DIR "/loco-worker --insecure --coordinator=127.0.0.1:1 "
      "--steps=1 >\"$log\" 2>&1 & pid=$!; "
      "for i in $(seq 300); do grep -q \"Join at\" \"$log\" && break; sleep 0.1; done; "
      "start=$(date +%s%N); kill -TERM $pid; "
      "for i in $(seq 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done; "
      "kill -KILL $pid 2>/dev/null; wait $pid; rc=$?; "
      "echo \"rc=$rc ms=$(( ($(date +%s%N) - start) / 1000000 ))\"; cat \"$log\"";
  std::string out;
  ASSERT_EQ(RunCommand("timeout 90 bash -c '" + command + "' 2>&1", &out), 0) << out;
  ASSERT_NE(out.find("Join at 127.0.0.1:1"), std::string::npos) << "it never tried to join\n"
                                                                 << out;
  EXPECT_NE(out.find("rc=0 "), std::string::npos) << out;
  EXPECT_NE(out.find("while joining: ending without waiting for the join"), std::string::npos)
      << out;
  const size_t at = out.find(" ms=");
  ASSERT_NE(at, std::string::npos) << out;
  const long ms = std::stol(out.substr(at + 4));
  EXPECT_LT(ms, 10000) << "SIGTERM took " << ms << " ms\n" << out;
}

// The data set is a named pipe nobody writes: loading blocks in open()
// for good, as on a stalled network file system. The signal was held until
// the load ended (here: never, so the test's own KILL ended it).
TEST(WorkerSignalTest, SigtermWhileTheDataLoadsEndsTheWorkerInSeconds) {
  const std::string dir = ::testing::TempDir() + "/signal_test_data";
  const std::string log = ::testing::TempDir() + "/signal_test_loading.log";
  const std::string command =
      "dir=" + dir + "; log=" + log +
      "; rm -rf \"$dir\"; mkdir -p \"$dir\"; "
      "mkfifo \"$dir/train-images-idx3-ubyte.gz\"; " LOCO_BIN_DIR
      "/loco-worker --insecure --coordinator=127.0.0.1:1 --steps=1 --data-dir=\"$dir\" "
      ">\"$log\" 2>&1 & pid=$!; "
      "for i in $(seq 300); do grep -q \"loading --model\" \"$log\" && break; sleep 0.1; done; "
      "sleep 0.5; start=$(date +%s%N); kill -TERM $pid; "
      "for i in $(seq 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done; "
      "kill -KILL $pid 2>/dev/null; wait $pid; rc=$?; "
      "echo \"rc=$rc ms=$(( ($(date +%s%N) - start) / 1000000 ))\"; cat \"$log\"; "
      "rm -rf \"$dir\"";
  std::string out;
  ASSERT_EQ(RunCommand("timeout 90 bash -c '" + command + "' 2>&1", &out), 0) << out;
  ASSERT_NE(out.find("loading --model mlp"), std::string::npos) << "it never began loading\n"
                                                                << out;
  EXPECT_NE(out.find("rc=0 "), std::string::npos) << out;
  EXPECT_NE(out.find("signal 15 before joining (loading the model and its data); ending"),
            std::string::npos)
      << out;
  const size_t at = out.find(" ms=");
  ASSERT_NE(at, std::string::npos) << out;
  const long ms = std::stol(out.substr(at + 4));
  EXPECT_LT(ms, 10000) << "SIGTERM took " << ms << " ms\n" << out;
}

}  // namespace
}  // namespace loco

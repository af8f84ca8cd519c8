#include "common/parallel_for.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace loco {
namespace {

// Every iteration runs exactly once, each worker's iterations are one
// contiguous run in order, and the split is the documented one.
TEST(ParallelFor, RunsEveryTaskOnceInContiguousRunsPerWorker) {
  for (size_t tasks : {0, 1, 2, 7, 64, 1001}) {
    for (size_t threads : {0, 1, 2, 3, 8, 2000}) {
      SCOPED_TRACE(::testing::Message() << tasks << " tasks, " << threads << " threads");
      const size_t workers = ParallelWorkers(tasks, threads);
      EXPECT_GE(workers, 1u);
      EXPECT_LE(workers, std::max<size_t>(1, std::min(std::max<size_t>(threads, 1), tasks)));
      std::vector<std::atomic<int>> runs(tasks);
      std::vector<std::vector<size_t>> by_worker(workers);
      std::mutex mu;
      std::set<std::thread::id> ids;
      ParallelFor(tasks, threads, [&](size_t task, size_t worker) {
        ASSERT_LT(worker, workers);
        runs[task]++;
        std::lock_guard<std::mutex> lock(mu);
        by_worker[worker].push_back(task);
        ids.insert(std::this_thread::get_id());
      });
      for (size_t t = 0; t < tasks; ++t) EXPECT_EQ(runs[t].load(), 1) << "task " << t;
      for (size_t w = 0; w < workers; ++w) {
        std::vector<size_t> expected;
        for (size_t t = tasks * w / workers; t < tasks * (w + 1) / workers; ++t) {
          expected.push_back(t);
        }
        EXPECT_EQ(by_worker[w], expected) << "worker " << w;
      }
      // Worker 0 is the caller; the others are threads of their own.
      if (tasks > 0) {
        EXPECT_EQ(ids.size(), workers);
        EXPECT_EQ(ids.count(std::this_thread::get_id()), 1u);
      }
    }
  }
}

}  // namespace
}  // namespace loco

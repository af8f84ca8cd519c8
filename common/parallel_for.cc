#include "common/parallel_for.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace loco {

size_t ParallelWorkers(size_t tasks, size_t threads) {
  return std::max<size_t>(1, std::min(std::max<size_t>(1, threads), tasks));
}

void ParallelFor(size_t tasks, size_t threads,
                 const std::function<void(size_t task, size_t worker)>& fn) {
  if (tasks == 0) return;
  const size_t workers = ParallelWorkers(tasks, threads);
  const auto run = [&](size_t w) {
    const size_t begin = tasks * w / workers, end = tasks * (w + 1) / workers;
    for (size_t t = begin; t < end; ++t) fn(t, w);
  };
  std::vector<std::thread> helpers;
  helpers.reserve(workers - 1);
  for (size_t w = 1; w < workers; ++w) helpers.emplace_back(run, w);
  run(0);
  for (std::thread& h : helpers) h.join();
}

}  // namespace loco

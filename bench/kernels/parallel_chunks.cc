#include "parallel_chunks.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace loco::bench {

Status ParallelChunks(size_t n, size_t align, int threads,
                      const std::function<Status(size_t begin, size_t length)>& fn) {
  const size_t units = (n + align - 1) / align;
  const size_t parts = std::clamp<size_t>(static_cast<size_t>(std::max(threads, 1)), 1, std::max<size_t>(units, 1));
  std::vector<Status> results(parts);
  std::vector<std::thread> workers;
  workers.reserve(parts - 1);
  for (size_t t = 0; t < parts; ++t) {
    const size_t begin = std::min(n, units * t / parts * align);
    const size_t end = std::min(n, units * (t + 1) / parts * align);
    auto run = [&fn, &results, t, begin, end] { results[t] = fn(begin, end - begin); };
    if (t + 1 == parts) {
      run();
    } else {
      workers.emplace_back(run);
    }
  }
  for (std::thread& w : workers) w.join();
  for (Status& s : results) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

int AllCores() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

}  // namespace loco::bench

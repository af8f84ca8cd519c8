// Runs a single-threaded kernel over [0, n) split into `threads` contiguous,
// block-aligned chunks, one std::thread per chunk (the calling thread takes
// the last one). Threads are started per call: at the sizes benchmarked
// (>= 2^20 elements, milliseconds per call) the ~tens of microseconds this
// costs are noise, and the copy baseline pays the same.
#pragma once

#include <cstddef>
#include <functional>

#include "common/status.h"

namespace loco::bench {

// fn(begin, length) for each chunk; begin is a multiple of `align`. Returns
// the first non-OK status (all chunks run regardless).
Status ParallelChunks(size_t n, size_t align, int threads,
                      const std::function<Status(size_t begin, size_t length)>& fn);

// Number of threads for "all cores": std::thread::hardware_concurrency(), at least 1.
int AllCores();

}  // namespace loco::bench

// ParallelFor: runs a loop's independent iterations on a few threads.
//
//   ParallelFor(pieces, threads, [&](size_t piece, size_t worker) { ... });
//
// Iterations [0, tasks) are split into `workers` = min(threads, tasks)
// contiguous runs of nearly equal length; worker w runs its run in order,
// worker 0 on the calling thread, the others on threads started for the
// call and joined before it returns. The split depends only on `tasks` and
// `threads`, so a computation that combines per-iteration results in
// iteration order is the same for every thread count.
//
// Contract: fn may be called concurrently for distinct iterations (it must
// only share read-only state or state indexed by `worker` or `piece`) and
// must not throw. threads == 0 is treated as 1. Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <functional>

namespace loco {

// The number of workers ParallelFor(tasks, threads, ...) uses.
size_t ParallelWorkers(size_t tasks, size_t threads);

void ParallelFor(size_t tasks, size_t threads,
                 const std::function<void(size_t task, size_t worker)>& fn);

}  // namespace loco

// The C++ library's log lines in Python: the functions of loco_ps._core
// that loco_ps/_native_log.py drives (all private, named _log_*):
//
//   _log_start(after_fork=False)  installs the process's log sink
//                                 (common/log.h) that queues every line
//                                 (python/src/log_queue.h)
//   _log_wait() -> bool           waits, the GIL released, until lines are
//                                 queued (True) or _log_stop ran (False)
//   _log_take() -> (lines, dropped)  the queued lines as (level, time,
//                                 message) tuples, level 0 info, 1 warning,
//                                 2 error, time as time.time() gives it
//   _log_stop()                   puts the fd-2 sink back and wakes _log_wait
//
// The sink is process-wide (like fd 2), so the queue it feeds is too: the
// one object of this module that is not per Worker.
#pragma once

#include <pybind11/pybind11.h>

namespace loco::python {

// Defines the _log_* functions above on `m`. Installs nothing by itself.
void BindLogRelay(pybind11::module_& m);

// Called by each Worker's constructor, with the GIL: tells
// loco_ps._native_log that lines may come now (only a Worker's code logs),
// so that it starts its delivering thread if it has none. A failure there
// is reported as unraisable, never raised: logging must not stop a Worker.
void OnWorkerMade();

}  // namespace loco::python

// MetricsText: one scrape of a registry as Prometheus text, without an HTTP
// server of ours: what MetricsEndpoint serves (the registry's families,
// then the process's memory, metrics/process_memory.h), for a process that
// serves the text itself. loco_ps (python/) does: a Python process cannot
// give civetweb's threads the stack floor that the project's executables
// export (metrics/thread_stack_floor.h), so its /metrics server is
// Python's own.
//
// Thread-safe as prometheus::Registry::Collect is.
#pragma once

#include <prometheus/registry.h>

#include <string>

namespace loco {

// The text format (version 0.0.4) of `registry`'s families followed by the
// process's memory gauges.
std::string MetricsText(const prometheus::Registry& registry);

}  // namespace loco

// A floor under explicit thread stack sizes, for the metrics HTTP server.
//
// civetweb (prometheus-cpp's HTTP server) starts its threads with an
// explicit 100 KiB stack, and glibc carves each thread's static TLS out of
// the size a thread asks for (glibc bug 11787). A process that also loads a
// library with large static TLS then leaves civetweb's threads too little
// stack: with the CUDA runtime (4 KiB, page-aligned) they crash in vsnprintf
// on the first scrape, with cuBLASLt (94 KiB) they cannot start at all.
//
// thread_stack_floor.cc interposes pthread_attr_setstacksize for the whole
// process (the executable's definition comes before libc's) and raises every
// explicit request below kMinThreadStackBytes to it; larger requests and
// threads with default attributes are untouched. MetricsEndpoint::Start
// references it, so every binary that serves metrics links it, and
// loco_metrics makes every executable that links it export the symbol.
#pragma once

#include <cstddef>

namespace loco {

inline constexpr size_t kMinThreadStackBytes = size_t{1} << 20;

// The stack size an explicit request for `requested` bytes gets.
size_t FlooredStackSize(size_t requested);

}  // namespace loco

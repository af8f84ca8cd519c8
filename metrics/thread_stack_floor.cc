#include "metrics/thread_stack_floor.h"

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cerrno>

namespace loco {

size_t FlooredStackSize(size_t requested) { return std::max(requested, kMinThreadStackBytes); }

}  // namespace loco

// Interposes libc's: see thread_stack_floor.h. Thread-safe: the lookup is a
// function-local static.
extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  using Fn = int (*)(pthread_attr_t*, size_t);
  static const Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  if (next == nullptr) return ENOSYS;
  return next(attr, loco::FlooredStackSize(size));
}

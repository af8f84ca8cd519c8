#include "kernels/cpu_features.h"

#include <unistd.h>

#include <algorithm>

namespace loco::cpu::detail {

#if defined(__x86_64__) && defined(__GNUC__)

bool HaveAvx512() {
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("fma");
  }();
  return have;
}

bool HaveAvx512Icl() {
  static const bool have =
      HaveAvx512() && __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni");
  return have;
}

bool HaveAvx2() {
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return have;
}

#endif

size_t StreamingStoreBytes() {
  static const size_t bytes = [] {
    long cache = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    cache = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    if (cache <= 0) cache = long{32} << 20;
    const long cpus = std::max(sysconf(_SC_NPROCESSORS_ONLN), 1L);
    return static_cast<size_t>(cache / cpus);
  }();
  return bytes;
}

#if !(defined(__x86_64__) && defined(__GNUC__))

bool HaveAvx512() { return false; }
bool HaveAvx512Icl() { return false; }
bool HaveAvx2() { return false; }

#endif

}  // namespace loco::cpu::detail

#include "kernels/cpu_features.h"

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

bool HaveAvx2() {
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return have;
}

#else

bool HaveAvx512() { return false; }
bool HaveAvx2() { return false; }

#endif

}  // namespace loco::cpu::detail

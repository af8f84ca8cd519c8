#include "kernels/cpu_features.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

// Last: its pragmas hold to the end of the file.
#include "kernels/avx512_target.h"

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

namespace {

// Independent FMA chains: more than the latency (4 cycles) times the FMA
// units (2) of any CPU here, so the loop is bound by FMA throughput alone.
constexpr int kChains = 12;
constexpr int kRounds = 4000;  // 48000 FMAs: 8-16 µs at 3 GHz

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// kRounds rounds of kChains 512-bit FMAs. The chains are unrolled so that
// each stays in a register; the empty asm keeps every FMA in the loop
// (and the results "used").
__attribute__((target("avx512f,fma"), noinline)) double ZmmFmaSeconds() {
  __m512 acc[kChains];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(1.0f + 0.001f * static_cast<float>(c));
  const __m512 factor = _mm512_set1_ps(0.9999999f), addend = _mm512_set1_ps(1e-7f);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < kRounds; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], factor, addend);
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) __asm__ volatile("" : "+v"(acc[c]));
  }
  return SecondsSince(start);
}

// The same on 256-bit vectors. (Written out twice: each loop must be
// compiled for its own target, which a shared template cannot carry.)
__attribute__((target("avx2,fma"), noinline)) double YmmFmaSeconds() {
  __m256 acc[kChains];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(1.0f + 0.001f * static_cast<float>(c));
  const __m256 factor = _mm256_set1_ps(0.9999999f), addend = _mm256_set1_ps(1e-7f);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < kRounds; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], factor, addend);
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) __asm__ volatile("" : "+v"(acc[c]));
  }
  return SecondsSince(start);
}

}  // namespace

bool Avx512SplitsZmm() {
  static const bool splits = [] {
    if (!HaveAvx512()) return false;
    double zmm = 1e30, ymm = 1e30;
    for (int run = 0; run < 7; ++run) {  // alternating: a slow stretch slows both
      zmm = std::min(zmm, ZmmFmaSeconds());
      ymm = std::min(ymm, YmmFmaSeconds());
    }
    return zmm >= 1.5 * ymm;
  }();
  return splits;
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
bool Avx512SplitsZmm() { return false; }

#endif

}  // namespace loco::cpu::detail

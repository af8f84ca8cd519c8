#include "common/blas_advice.h"

#include <algorithm>
#include <array>

namespace loco {
namespace {

// OpenBLAS's x86 core names (0.3.21), by the widest vectors their kernels use.
constexpr std::array<std::string_view, 3> kAvx512Cores = {"SkylakeX", "Cooperlake",
                                                          "SapphireRapids"};
constexpr std::array<std::string_view, 2> kAvx2Cores = {"Haswell", "Zen"};
constexpr std::array<std::string_view, 15> kNarrowCores = {
    "Prescott", "Core2",     "Penryn",     "Dunnington", "Nehalem",
    "Atom",     "Sandybridge", "Barcelona", "Bulldozer",  "Piledriver",
    "Steamroller", "Excavator", "Katmai",   "Coppermine", "Northwood"};

template <size_t N>
bool In(const std::array<std::string_view, N>& names, std::string_view core) {
  return std::find(names.begin(), names.end(), core) != names.end();
}

}  // namespace

CpuVectors DetectCpuVectors() {
  CpuVectors v;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  v.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  v.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
#endif
  return v;
}

std::optional<BlasAdvice> AdviseBlasKernels(std::string_view core, CpuVectors cpu,
                                            bool pinned) {
  if (pinned) return std::nullopt;
  const bool narrow = In(kNarrowCores, core);
  const bool avx2 = In(kAvx2Cores, core);
  if (!narrow && !avx2 && !In(kAvx512Cores, core)) return std::nullopt;  // unknown to us
  if (cpu.avx512 && (narrow || avx2)) return BlasAdvice{std::string(core), "SkylakeX", "AVX-512"};
  if (cpu.avx2_fma && narrow) return BlasAdvice{std::string(core), "Haswell", "AVX2"};
  return std::nullopt;
}

std::string BlasAdvice::ToString() const {
  return "OpenBLAS runs its " + core + " kernels on a CPU with " + vectors +
         " (this OpenBLAS may not know the CPU); OPENBLAS_CORETYPE=" + wider +
         " in the environment runs wider ones, often 2-3x faster products: check them first "
         "(bench/README.md, \"Which OpenBLAS kernels\")";
}

}  // namespace loco

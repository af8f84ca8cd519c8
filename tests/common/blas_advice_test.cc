#include "common/blas_advice.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>

namespace loco {
namespace {

constexpr CpuVectors kAvx512{true, true};
constexpr CpuVectors kAvx2{true, false};
constexpr CpuVectors kOld{false, false};

// The advice's line, or empty when there is none.
std::string Advice(std::string_view core, CpuVectors cpu, bool pinned) {
  const std::optional<BlasAdvice> a = AdviseBlasKernels(core, cpu, pinned);
  return a ? a->ToString() : std::string();
}

TEST(BlasKernelAdvice, NamesTheWidestKernelsTheCpuRuns) {
  const std::string fallback = Advice("Prescott", kAvx512, false);
  EXPECT_NE(fallback.find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << fallback;
  EXPECT_NE(fallback.find("Prescott"), std::string::npos) << fallback;
  const std::string avx2 = Advice("Haswell", kAvx512, false);
  EXPECT_NE(avx2.find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << avx2;
  const std::string sse = Advice("Sandybridge", kAvx2, false);
  EXPECT_NE(sse.find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << sse;
}

TEST(BlasKernelAdvice, SaysNothingWhenTheKernelsAreAsWideAsTheCpu) {
  EXPECT_EQ(Advice("SkylakeX", kAvx512, false), "");
  EXPECT_EQ(Advice("Cooperlake", kAvx512, false), "");
  EXPECT_EQ(Advice("Haswell", kAvx2, false), "");
  EXPECT_EQ(Advice("Zen", kAvx2, false), "");
  EXPECT_EQ(Advice("Prescott", kOld, false), "");
}

TEST(BlasKernelAdvice, LeavesAPinAndUnknownNamesAlone) {
  EXPECT_EQ(Advice("Haswell", kAvx512, true), "");
  EXPECT_EQ(Advice("Prescott", kAvx512, true), "");
  EXPECT_EQ(Advice("NewCore2030", kAvx512, false), "");
  EXPECT_EQ(Advice("", kAvx512, false), "");
}

TEST(BlasKernelAdvice, NamesTheCoresAndVectorsForTheLauncher) {
  const std::optional<BlasAdvice> a = AdviseBlasKernels("Prescott", kAvx512, false);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->core, "Prescott");
  EXPECT_EQ(a->wider, "SkylakeX");
  EXPECT_EQ(a->vectors, "AVX-512");
  EXPECT_NE(a->ToString().find("OpenBLAS runs its Prescott kernels on a CPU with AVX-512"),
            std::string::npos)
      << a->ToString();
  const std::optional<BlasAdvice> b = AdviseBlasKernels("Nehalem", kAvx2, false);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->wider, "Haswell");
  EXPECT_EQ(b->vectors, "AVX2");
  EXPECT_FALSE(AdviseBlasKernels("SkylakeX", kAvx512, false).has_value());
}

TEST(BlasKernelAdvice, ThisCpuIsDetectedConsistently) {
  const CpuVectors v = DetectCpuVectors();
  EXPECT_TRUE(!v.avx512 || v.avx2_fma);  // every AVX-512 CPU has AVX2 and FMA
}

}  // namespace
}  // namespace loco

// LoCo compression: CUDA against the CPU reference over 20 steps of every
// mode (naive / error feedback / LoCo), both error encodings (int8 + scale,
// fp32), with and without the error reset, nearest and stochastic rounding.
// Payload codes and scales and the stored error state are compared bit for
// bit after every step; the non-finite count exactly; error_sq_norm (a double
// sum whose block order differs on the GPU) within 1e-12 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "kernels/device.h"
#include "kernels/loco_compress.h"
#include "parity_inputs.h"

namespace loco {
namespace {

using testing::DeviceBuffer;
using testing::FloatBits;

struct LocoCase {
  CompensationMode mode;
  int error_bits;
  int64_t reset_period;
  int bits;
  int block;
  Rounding rounding;
  std::string name;
};

std::vector<LocoCase> LocoCases() {
  using M = CompensationMode;
  const Rounding N = Rounding::kNearest;
  return {
      {M::kNaive, 8, 0, 4, 128, N, "naive"},
      {M::kEf, 8, 0, 4, 128, N, "ef-int8"},
      {M::kEf, 32, 0, 4, 128, N, "ef-fp32"},
      {M::kLoco, 8, 0, 4, 128, N, "loco-int8"},
      {M::kLoco, 32, 0, 4, 128, N, "loco-fp32"},
      {M::kLoco, 8, 5, 4, 128, N, "loco-int8-reset5"},
      {M::kLoco, 32, 5, 4, 128, N, "loco-fp32-reset5"},
      {M::kLoco, 8, 3, 2, 64, N, "loco-int8-2bit-block64-reset3"},
      {M::kLoco, 8, 0, 8, 256, N, "loco-int8-8bit-block256"},
      {M::kLoco, 8, 7, 4, 4096, Rounding::kStochastic, "loco-int8-stochastic-block4096-reset7"},
  };
}

// Gradient for `step`: Gaussian with a per-step magnitude; step 6 carries
// NaN/Inf, step 9 values near FLT_MAX, step 12 denormals and zeros.
std::vector<float> Gradient(size_t n, int step, uint32_t seed) {
  std::mt19937 rng(seed * 1000 + static_cast<uint32_t>(step));
  std::normal_distribution<float> normal(0.0f, std::pow(2.0f, static_cast<float>(step % 5) - 2.0f));
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = normal(rng);
    if (step == 6 && i % 97 == 5) g[i] = i % 2 ? std::numeric_limits<float>::quiet_NaN()
                                               : -std::numeric_limits<float>::infinity();
    if (step == 9 && i % 131 == 0) g[i] = std::numeric_limits<float>::max() * (i % 2 ? 1.0f : -0.75f);
    if (step == 12 && i < 700) g[i] = i % 3 == 0 ? 0.0f : std::numeric_limits<float>::denorm_min() * static_cast<float>(i % 4);
  }
  return g;
}

TEST(CudaLocoParity, TwentyStepsBitIdentical) {
  LOCO_REQUIRE_CUDA_DEVICE();
  for (const LocoCase& c : LocoCases()) {
    SCOPED_TRACE(c.name);
    LocoParams p;
    p.mode = c.mode;
    p.bits = c.bits;
    p.block_size = c.block;
    p.beta = 0.6f;
    p.reset_period = c.reset_period;
    p.rounding = c.rounding;
    p.seed = 77;
    p.index_offset = 2 * static_cast<uint64_t>(c.block);
    p.error_bits = c.error_bits;
    const size_t n = static_cast<size_t>(c.block) * 9 + 37;  // a partial last block
    const size_t blocks = NumBlocks(n, c.block);

    ErrorState cpu_state(n, c.block, c.error_bits);
    DeviceBuffer<int8_t> d_ecodes(n);
    DeviceBuffer<float> d_escales(blocks);
    DeviceBuffer<float> d_evalues(n);
    DeviceBuffer<float> d_g(n);
    DeviceBuffer<uint8_t> d_codes(PackedBytes(n, c.bits));
    DeviceBuffer<float> d_scales(blocks);
    ASSERT_TRUE(d_ecodes.ok() && d_escales.ok() && d_evalues.ok() && d_g.ok() && d_codes.ok() && d_scales.ok());
    ErrorStateView d_state;
    if (c.mode != CompensationMode::kNaive) {
      if (c.error_bits == 8) {
        d_state.codes = d_ecodes.data();
        d_state.scales = d_escales.data();
      } else {
        d_state.values = d_evalues.data();
      }
    }
    std::vector<uint8_t> codes(PackedBytes(n, c.bits));
    std::vector<float> scales(blocks);

    for (int step = 0; step < 20; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const std::vector<float> g = Gradient(n, step, 5);
      LocoStats stats, dstats;
      ASSERT_TRUE(cpu::LocoCompress(g.data(), n, step, p,
                                    c.mode == CompensationMode::kNaive ? ErrorStateView{} : cpu_state.view(),
                                    codes.data(), scales.data(), &stats)
                      .ok());
      d_g.Upload(g);
      const Status s = cuda::LocoCompress(d_g.data(), n, step, p, d_state, d_codes.data(),
                                          d_scales.data(), &dstats, nullptr);
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_EQ(d_codes.Download(), codes);
      ASSERT_EQ(FloatBits(d_scales.Download()), FloatBits(scales));
      EXPECT_EQ(dstats.nonfinite, stats.nonfinite);
      EXPECT_NEAR(dstats.error_sq_norm, stats.error_sq_norm, 1e-12 * std::abs(stats.error_sq_norm));
      if (c.mode == CompensationMode::kNaive) continue;
      if (c.error_bits == 8) {
        ASSERT_EQ(d_ecodes.Download(), cpu_state.codes());
        ASSERT_EQ(FloatBits(d_escales.Download()), FloatBits(cpu_state.scales()));
      } else {
        ASSERT_EQ(FloatBits(d_evalues.Download()), FloatBits(cpu_state.values()));
      }
      if (c.reset_period > 0 && (step + 1) % c.reset_period == 0) {
        EXPECT_EQ(stats.error_sq_norm, 0.0);  // the reset really happened on both sides
      }
    }
  }
}

// The state must be untouched by kNaive, and null state pointers accepted.
TEST(CudaLocoParity, NaiveLeavesStateAlone) {
  LOCO_REQUIRE_CUDA_DEVICE();
  const size_t n = 1000;
  LocoParams p;
  p.mode = CompensationMode::kNaive;
  const std::vector<float> g = Gradient(n, 1, 9);
  DeviceBuffer<float> d_g(g);
  DeviceBuffer<uint8_t> d_codes(PackedBytes(n, p.bits));
  DeviceBuffer<float> d_scales(NumBlocks(n, p.block_size));
  std::vector<int8_t> sentinel(n, 42);
  DeviceBuffer<int8_t> d_ecodes(sentinel);
  ErrorStateView state;
  state.codes = d_ecodes.data();
  ASSERT_TRUE(cuda::LocoCompress(d_g.data(), n, 0, p, state, d_codes.data(), d_scales.data(), nullptr, nullptr).ok());
  ASSERT_TRUE(cuda::LocoCompress(d_g.data(), n, 0, p, ErrorStateView{}, d_codes.data(), d_scales.data(), nullptr, nullptr).ok());
  EXPECT_EQ(d_ecodes.Download(), sentinel);
}

}  // namespace
}  // namespace loco

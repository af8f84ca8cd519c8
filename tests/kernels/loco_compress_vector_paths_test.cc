// Every vector path of cpu::LocoCompress, each forced whatever this CPU
// would pick (the AVX2 one runs here on AVX-512 machines too), against the
// portable path bit for bit: block sizes 32 to 4096, a partial last block
// of every length class, 2/4/8 bits, both compensating modes, resets,
// unaligned gradient, state and payload pointers, and non-finite, zero,
// subnormal and near-overflow values. The state is carried across steps,
// so a wrong code or scale in one step also shows in the next ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/loco_compress_avx512.h"
#include "tests/common/same_bits.h"
#include "tests/kernels/hard_gradient.h"
#include "tests/kernels/spec_reference.h"

namespace loco {
namespace {

using PathFn = void (*)(const float*, size_t, bool, const LocoParams&, ErrorStateView, uint8_t*,
                        float*, LocoStats*);

struct VectorPath {
  std::string name;
  PathFn run;
  bool (*available)();
};

std::vector<VectorPath> VectorPaths() {
  return {{"avx2", cpu::detail::LocoCompressAvx2, cpu::detail::HaveAvx2},
          {"avx512", cpu::detail::LocoCompressAvx512, cpu::detail::HaveAvx512},
          {"avx512_icl", cpu::detail::LocoCompressAvx512Icl, cpu::detail::HaveAvx512Icl}};
}

// One path's buffers, `shift` bytes past an aligned start (so that the
// vector loads and stores see unaligned addresses).
struct PathBuffers {
  PathBuffers(size_t n, const LocoParams& p, size_t shift)
      : g_storage(n + 16),
        state_storage(n + 64, 0),
        state_scales(NumBlocks(n, p.block_size), 0.0f),
        payload_storage(PackedBytes(n, p.bits) + 64, 0xAB),
        scales(NumBlocks(n, p.block_size), -1.0f),
        shift(shift) {}
  float* g() { return g_storage.data() + shift % 4; }
  ErrorStateView state() { return {state_storage.data() + shift, state_scales.data(), nullptr}; }
  uint8_t* payload() { return payload_storage.data() + shift; }

  std::vector<float> g_storage;
  std::vector<int8_t> state_storage;
  std::vector<float> state_scales;
  std::vector<uint8_t> payload_storage;
  std::vector<float> scales;
  LocoStats stats{99, -1.0, -1.0};
  size_t shift;
};

TEST(LocoCompressVectorPathsTest, MatchThePortablePathBitForBit) {
  for (const VectorPath& path : VectorPaths()) {
    if (!path.available()) {
      std::printf("[ SKIPPED  ] the %s path: this CPU lacks it\n", path.name.c_str());
      continue;
    }
    int cases = 0;
    for (int block : {32, 64, 96, 128, 256, 4096}) {
      for (int bits : {2, 4, 8}) {
        for (CompensationMode mode : {CompensationMode::kEf, CompensationMode::kLoco}) {
          for (size_t tail : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{15}, size_t{16},
                              size_t{17}, size_t{31}, size_t{33}, static_cast<size_t>(block - 1)}) {
            const size_t shift = (static_cast<size_t>(bits) + tail) % 5;  // 0..4 bytes
            const size_t n = 3 * static_cast<size_t>(block) + tail;
            LocoParams p;
            p.mode = mode;
            p.bits = bits;
            p.block_size = block;
            p.beta = 0.3f;
            p.reset_period = 6;
            ASSERT_TRUE(cpu::detail::Avx512Handles(p));
            PathBuffers fast(n, p, shift), portable(n, p, 0);
            for (int64_t t = 0; t < 8; ++t) {
              SCOPED_TRACE(::testing::Message()
                           << path.name << " block " << block << " bits " << bits << " mode "
                           << static_cast<int>(mode) << " n " << n << " shift " << shift
                           << " step " << t);
              const std::vector<float> g = HardGradient(n, static_cast<size_t>(block), t,
                                                        static_cast<uint32_t>(block + bits + tail));
              std::copy(g.begin(), g.end(), fast.g());
              std::copy(g.begin(), g.end(), portable.g());
              const bool reset = mode == CompensationMode::kLoco && (t + 1) % p.reset_period == 0;
              path.run(fast.g(), n, reset, p, fast.state(), fast.payload(), fast.scales.data(),
                       &fast.stats);
              cpu::detail::LocoCompressPortable(portable.g(), n, reset, p, portable.state(),
                                                portable.payload(), portable.scales.data(),
                                                &portable.stats);
              const size_t bytes = PackedBytes(n, bits);
              ASSERT_EQ(0, std::memcmp(fast.payload(), portable.payload(), bytes));
              // Nothing written past the payload's last byte.
              ASSERT_EQ(fast.payload()[bytes], 0xAB);
              ASSERT_TRUE(SameBits(fast.scales, portable.scales));
              ASSERT_EQ(0, std::memcmp(fast.state().codes, portable.state().codes, n));
              ASSERT_EQ(fast.state().codes[n], 0);
              ASSERT_TRUE(SameBits(fast.state_scales, portable.state_scales));
              ASSERT_EQ(fast.stats.nonfinite, portable.stats.nonfinite);
              ASSERT_EQ(fast.stats.error_sq_norm, portable.stats.error_sq_norm);
              // A metric, summed in another lane order (kernels/loco_compress.h).
              ASSERT_NEAR(fast.stats.grad_sq_norm, portable.stats.grad_sq_norm,
                          1e-5 * portable.stats.grad_sq_norm);
              ++cases;
            }
          }
        }
      }
    }
    EXPECT_EQ(cases, 6 * 3 * 2 * 10 * 8);
  }
}

// Calls over parts of one range, as GradientEncoder makes them (each part
// a whole number of blocks), give the bits of one call over the range.
TEST(LocoCompressVectorPathsTest, PartsOfARangeMatchOneCall) {
  for (const VectorPath& path : VectorPaths()) {
    if (!path.available()) continue;
    SCOPED_TRACE(path.name);
    const size_t block = 128, n = 40 * block + 77;
    LocoParams p;
    p.block_size = static_cast<int>(block);
    const std::vector<float> g = testing_ref::RandomVector(n, 5);
    ErrorState whole(n, p.block_size), parts(n, p.block_size);
    std::vector<uint8_t> c1(PackedBytes(n, p.bits)), c2(c1.size());
    std::vector<float> s1(NumBlocks(n, p.block_size)), s2(s1.size());
    for (int64_t t = 0; t < 3; ++t) {
      path.run(g.data(), n, false, p, whole.view(), c1.data(), s1.data(), nullptr);
      for (size_t begin = 0; begin < n; begin += 7 * block) {
        const size_t len = std::min(7 * block, n - begin);
        ErrorStateView v = parts.view();
        v.codes += begin;
        v.scales += begin / block;
        path.run(g.data() + begin, len, false, p, v, c2.data() + begin * 4 / 8,
                 s2.data() + begin / block, nullptr);
      }
      ASSERT_EQ(c1, c2);
      ASSERT_TRUE(SameBits(s1, s2));
      ASSERT_EQ(whole.codes(), parts.codes());
      ASSERT_TRUE(SameBits(whole.scales(), parts.scales()));
    }
  }
}

}  // namespace
}  // namespace loco

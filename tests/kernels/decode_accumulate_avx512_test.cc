// The AVX-512 4-bit path of DecodeAccumulateRange, called directly, against
// the contract's arithmetic written out per element (decode (float)code *
// scale, sum in payload order, times (float)(1.0 / n)), bit for bit: 1 to
// 17 payloads (across the 8-payload groups), different block sizes per
// payload, ranges that start inside blocks, zero and denormal scales.
// (decode_accumulate_test.cc checks whichever path this CPU takes.)
#include "kernels/decode_accumulate_avx512.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/quantize.h"

namespace loco {
namespace {

struct FourBitPayload {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  int block = 0;
  PayloadView view() const {
    PayloadView v;
    v.codec = PayloadCodec::kBlockQuant;
    v.bits = 4;
    v.block_size = block;
    v.data = codes.data();
    v.data_bytes = codes.size();
    v.scales = scales.data();
    v.num_scales = scales.size();
    return v;
  }
  float Decode(size_t i) const {
    const int field = (codes[i / 2] >> (4 * (i % 2))) & 0xF;
    const int code = field >= 8 ? field - 16 : field;
    return static_cast<float>(code) * scales[i / static_cast<size_t>(block)];
  }
};

// Random codes (every field value, -8 included) and scales, a few of them
// 0 or denormal.
FourBitPayload RandomPayload(size_t length, int block, uint32_t seed) {
  std::mt19937 rng(seed);
  FourBitPayload p;
  p.block = block;
  p.codes.resize(PackedBytes(length, 4));
  for (uint8_t& b : p.codes) b = static_cast<uint8_t>(rng());
  if (length % 2 != 0) p.codes.back() &= 0x0F;
  p.scales.resize(NumBlocks(length, block));
  std::uniform_real_distribution<float> scale(1e-4f, 2.0f);
  for (size_t k = 0; k < p.scales.size(); ++k) {
    p.scales[k] = k % 7 == 3   ? 0.0f
                  : k % 7 == 5 ? std::numeric_limits<float>::denorm_min() * 3.0f
                               : scale(rng);
  }
  return p;
}

TEST(DecodeAccumulateAvx512Test, FourBitTablePathMatchesTheContractBitForBit) {
  if (!cpu::detail::HaveAvx512()) GTEST_SKIP() << "this CPU has no AVX-512";
  const int blocks[] = {128, 32, 96, 4096, 64};
  const size_t length = 2 * 4096 + 32 * 5 + 9;
  for (size_t n : {size_t{1}, size_t{2}, size_t{4}, size_t{8}, size_t{9}, size_t{17}}) {
    std::vector<FourBitPayload> ps;
    std::vector<PayloadView> views;
    for (size_t k = 0; k < n; ++k) {
      ps.push_back(RandomPayload(length, blocks[k % 5], static_cast<uint32_t>(40 + k)));
    }
    for (const FourBitPayload& p : ps) views.push_back(p.view());
    const float inv_n = static_cast<float>(1.0 / static_cast<double>(n));
    for (size_t begin : {size_t{0}, size_t{32}, size_t{96}, size_t{4096 - 32}}) {
      const size_t count = (length - begin) / 32 * 32;
      SCOPED_TRACE(::testing::Message() << "n " << n << " begin " << begin);
      // One float past each end, to see that nothing else is written.
      std::vector<float> out(count + 2, -5.0f);
      cpu::detail::AccumulateFourBitAvx512(views.data(), n, begin, count, /*streaming=*/false,
                                           out.data() + 1);
      ASSERT_EQ(out.front(), -5.0f);
      ASSERT_EQ(out.back(), -5.0f);
      for (size_t o = 0; o < count; ++o) {
        float acc = ps[0].Decode(begin + o);
        for (size_t k = 1; k < n; ++k) acc = acc + ps[k].Decode(begin + o);
        const float want = n > 1 ? acc * inv_n : acc;
        uint32_t a, b;
        std::memcpy(&a, &out[o + 1], 4);
        std::memcpy(&b, &want, 4);
        ASSERT_EQ(a, b) << "element " << begin + o << ": " << out[o + 1] << " vs " << want;
      }
    }
  }
}

// The streaming stores (kernels/stream_writer_avx512.h) write the same
// bits as the ordinary ones, at every alignment of out a float can have
// (0 to 15 floats past a 64-byte line), for one vector pair, a few, and
// many; and nothing before or after the range. 9 payloads: the first group
// of 8 stores ordinarily, the last one streams.
TEST(DecodeAccumulateAvx512Test, StreamingStoresWriteTheSameBitsAtEveryAlignment) {
  if (!cpu::detail::HaveAvx512()) GTEST_SKIP() << "this CPU has no AVX-512";
  const size_t length = 4096 + 32 * 3;
  for (size_t n : {size_t{1}, size_t{9}}) {
    std::vector<FourBitPayload> ps;
    std::vector<PayloadView> views;
    for (size_t k = 0; k < n; ++k) {
      ps.push_back(RandomPayload(length, k % 2 == 0 ? 128 : 32, static_cast<uint32_t>(70 + k)));
    }
    for (const FourBitPayload& p : ps) views.push_back(p.view());
    for (size_t count : {size_t{32}, size_t{96}, length - length % 32}) {
      std::vector<float> want(count);
      cpu::detail::AccumulateFourBitAvx512(views.data(), n, 0, count, /*streaming=*/false,
                                           want.data());
      // 64-byte aligned storage with room for 16 floats of offset and a
      // float of guard on each side.
      std::vector<float> storage(count + 48, -5.0f);
      float* const line = reinterpret_cast<float*>(
          (reinterpret_cast<uintptr_t>(storage.data()) + 4 + 63) / 64 * 64);
      for (size_t offset = 0; offset < 16; ++offset) {
        SCOPED_TRACE(::testing::Message()
                     << "n " << n << " count " << count << " offset " << offset);
        std::fill(storage.begin(), storage.end(), -5.0f);
        float* const out = line + offset;
        cpu::detail::AccumulateFourBitAvx512(views.data(), n, 0, count, /*streaming=*/true, out);
        ASSERT_EQ(out[-1], -5.0f);
        ASSERT_EQ(out[count], -5.0f);
        ASSERT_EQ(std::memcmp(out, want.data(), count * sizeof(float)), 0);
      }
    }
  }
}

}  // namespace
}  // namespace loco

// The vector 4-bit paths of DecodeAccumulateRange (the AVX-512 table
// path, and the AVX2 instance of the same-bits path that CPUs without
// AVX-512 run), each called directly, against the contract's arithmetic written out per
// element (decode (float)code * scale, sum in payload order, times
// (float)(1.0 / n)), bit for bit: 1 to 17 payloads (across the 8-payload
// groups), different block sizes per payload, ranges that start inside
// blocks (and so write prefetches that would pass the range's end), zero,
// denormal and tiny scales. (decode_accumulate_test.cc checks whichever
// path this CPU takes.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/avx2_clones.h"
#include "kernels/cpu_features.h"
#include "kernels/decode_accumulate_avx512.h"
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
// 0, denormal or tiny.
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
                  : k % 9 == 6 ? std::nextafter(0x1p-100f, 1.0f)
                               : scale(rng);
  }
  return p;
}

// A path and whether this CPU runs it.
struct DecodePath {
  std::string name;
  bool (*available)();
  void (*accumulate)(const PayloadView*, size_t, size_t, size_t, float*);
};

void PrintTo(const DecodePath& path, std::ostream* os) { *os << path.name; }

class DecodeAccumulateVectorPathTest : public ::testing::TestWithParam<DecodePath> {
 protected:
  void SetUp() override {
    if (!GetParam().available()) GTEST_SKIP() << "this CPU does not run " << GetParam().name;
  }
  void Accumulate(const std::vector<PayloadView>& views, size_t begin, size_t count,
                  float* out) const {
    GetParam().accumulate(views.data(), views.size(), begin, count, out);
  }
};

void AccumulateAvx512(const PayloadView* payloads, size_t n, size_t begin, size_t count,
                      float* out) {
  cpu::detail::AccumulateFourBitAvx512(payloads, n, begin, count, /*streaming=*/false, out);
}

void AccumulateAvx2(const PayloadView* payloads, size_t n, size_t begin, size_t count, float* out) {
  cpu::detail::AccumulateBlockQuantAvx2(payloads, n, begin, count, 4, out);
}

INSTANTIATE_TEST_SUITE_P(
    Paths, DecodeAccumulateVectorPathTest,
    ::testing::Values(DecodePath{"avx512", cpu::detail::HaveAvx512, AccumulateAvx512},
                      DecodePath{"avx2", cpu::detail::HaveAvx2, AccumulateAvx2}),
    [](const ::testing::TestParamInfo<DecodePath>& info) { return info.param.name; });

TEST_P(DecodeAccumulateVectorPathTest, MatchesTheContractBitForBit) {
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
      Accumulate(views, begin, count, out.data() + 1);
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

// The AVX-512 path's streaming stores (kernels/stream_writer_avx512.h)
// write the same bits as the ordinary ones, at every alignment of out a
// float can have (0 to 15 floats past a 64-byte line), for one vector
// pair, a few, and many; and nothing before or after the range. 9
// payloads: the first group of 8 stores ordinarily, the last one streams.
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

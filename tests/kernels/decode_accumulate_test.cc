#include "kernels/decode_accumulate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/quantize.h"
#include "tests/kernels/spec_reference.h"

namespace loco {
namespace {

using testing_ref::RandomVector;
using testing_ref::UnpackRef;

// Owns the bytes behind one PayloadView.
struct OwnedPayload {
  PayloadCodec codec = PayloadCodec::kBlockQuant;
  int bits = 4;
  int block_size = 128;
  std::vector<uint8_t> data;
  std::vector<float> scales;

  PayloadView view() const {
    PayloadView v;
    v.codec = codec;
    v.bits = bits;
    v.block_size = block_size;
    v.data = data.data();
    v.data_bytes = data.size();
    v.scales = scales.data();
    v.num_scales = scales.size();
    return v;
  }
};

OwnedPayload Fp32Payload(const std::vector<float>& x) {
  OwnedPayload p;
  p.codec = PayloadCodec::kFp32;
  p.data.resize(x.size() * 4);
  std::memcpy(p.data.data(), x.data(), p.data.size());
  return p;
}

// bf16 by truncation: the test's expectation does not depend on the cast kernel.
OwnedPayload Bf16Payload(const std::vector<float>& x) {
  OwnedPayload p;
  p.codec = PayloadCodec::kBf16;
  p.data.resize(x.size() * 2);
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    const uint16_t b = static_cast<uint16_t>(u >> 16);
    std::memcpy(p.data.data() + 2 * i, &b, 2);
  }
  return p;
}

OwnedPayload QuantPayload(const std::vector<float>& x, int bits, int block) {
  OwnedPayload p;
  p.bits = bits;
  p.block_size = block;
  p.data.resize(PackedBytes(x.size(), bits));
  p.scales.resize(NumBlocks(x.size(), block));
  QuantizeParams qp;
  qp.bits = bits;
  qp.block_size = block;
  EXPECT_TRUE(cpu::Quantize(x.data(), x.size(), qp, p.data.data(), p.scales.data(), nullptr).ok());
  return p;
}

// Independent decode into double.
std::vector<double> DecodeDouble(const OwnedPayload& p, size_t n) {
  std::vector<double> d(n);
  switch (p.codec) {
    case PayloadCodec::kFp32:
      for (size_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, p.data.data() + 4 * i, 4);
        d[i] = v;
      }
      break;
    case PayloadCodec::kBf16:
      for (size_t i = 0; i < n; ++i) {
        const uint32_t u = static_cast<uint32_t>(p.data[2 * i] | (p.data[2 * i + 1] << 8)) << 16;
        float v;
        std::memcpy(&v, &u, 4);
        d[i] = v;
      }
      break;
    case PayloadCodec::kBlockQuant: {
      const std::vector<int> codes = UnpackRef(p.data.data(), n, p.bits);
      for (size_t i = 0; i < n; ++i) {
        d[i] = codes[i] * static_cast<double>(p.scales[i / static_cast<size_t>(p.block_size)]);
      }
      break;
    }
  }
  return d;
}

// The mean in fp32 differs from the exact mean by the n-1 additions and the
// final scaling: |err| <= (n + 1) 2^-24 Σ|d_k| / n, doubled for margin.
void CheckMean(const std::vector<OwnedPayload>& payloads, size_t length) {
  std::vector<PayloadView> views;
  for (const auto& p : payloads) views.push_back(p.view());
  std::vector<float> out(length, -123.0f);
  const Status st = cpu::DecodeAccumulate(views.data(), views.size(), length, out.data());
  ASSERT_TRUE(st.ok()) << st.ToString();
  const double n = static_cast<double>(payloads.size());
  std::vector<double> sum(length, 0.0), abs_sum(length, 0.0);
  for (const auto& p : payloads) {
    const std::vector<double> d = DecodeDouble(p, length);
    for (size_t i = 0; i < length; ++i) {
      sum[i] += d[i];
      abs_sum[i] += std::fabs(d[i]);
    }
  }
  for (size_t i = 0; i < length; ++i) {
    const double tol = 2 * (n + 1) * std::ldexp(abs_sum[i] / n, -24);
    ASSERT_NEAR(out[i], sum[i] / n, tol) << "element " << i;
  }
}

TEST(DecodeAccumulateTest, MeanOfMixedCodecsMatchesDouble) {
  for (size_t length : {size_t{1}, size_t{1000}, size_t{2 * 4096 + 77}}) {
    SCOPED_TRACE(length);
    std::vector<OwnedPayload> ps;
    ps.push_back(Fp32Payload(RandomVector(length, 1)));
    ps.push_back(Bf16Payload(RandomVector(length, 2)));
    ps.push_back(QuantPayload(RandomVector(length, 3), 4, 128));
    ps.push_back(QuantPayload(RandomVector(length, 4), 2, 64));
    ps.push_back(QuantPayload(RandomVector(length, 5), 8, 32));
    // 96 does not divide the 4096-element tiles: blocks straddle tiles.
    ps.push_back(QuantPayload(RandomVector(length, 6), 4, 96));
    ps.push_back(QuantPayload(RandomVector(length, 7), 4, 4096));
    for (size_t count = 2; count <= ps.size(); ++count) {
      SCOPED_TRACE(count);
      CheckMean(std::vector<OwnedPayload>(ps.begin(), ps.begin() + static_cast<long>(count)), length);
    }
  }
}

TEST(DecodeAccumulateTest, SinglePayloadDecodesExactly) {
  const size_t length = 777;
  const std::vector<float> x = RandomVector(length, 8);
  for (const OwnedPayload& p : {Fp32Payload(x), Bf16Payload(x), QuantPayload(x, 4, 128)}) {
    const PayloadView v = p.view();
    std::vector<float> out(length);
    ASSERT_TRUE(cpu::DecodeAccumulate(&v, 1, length, out.data()).ok());
    const std::vector<double> d = DecodeDouble(p, length);
    for (size_t i = 0; i < length; ++i) ASSERT_EQ(out[i], static_cast<float>(d[i])) << i;
  }
}

TEST(DecodeAccumulateTest, FourWorkersOfFourBitPayloads) {
  const size_t length = 3 * 4096 + 5;
  std::vector<OwnedPayload> ps;
  for (uint32_t w = 0; w < 4; ++w) ps.push_back(QuantPayload(RandomVector(length, 40 + w), 4, 128));
  CheckMean(ps, length);
}

// The contract's fp32 arithmetic, element by element: acc = D(p_0), then
// acc += D(p_k) in payload order, out = acc * (float)(1.0 / n) (n == 1: acc),
// D = (float)code * scale with the codes read bit by bit (UnpackRef).
std::vector<float> ContractMeanFp32(const std::vector<OwnedPayload>& ps, size_t length) {
  std::vector<std::vector<int>> codes;
  for (const auto& p : ps) codes.push_back(UnpackRef(p.data.data(), length, p.bits));
  const float inv_n = static_cast<float>(1.0 / static_cast<double>(ps.size()));
  std::vector<float> out(length);
  for (size_t i = 0; i < length; ++i) {
    float acc = 0.0f;
    for (size_t k = 0; k < ps.size(); ++k) {
      const float d = static_cast<float>(codes[k][i]) *
                      ps[k].scales[i / static_cast<size_t>(ps[k].block_size)];
      acc = k == 0 ? d : acc + d;
    }
    out[i] = ps.size() > 1 ? acc * inv_n : acc;
  }
  return out;
}

// Payloads that all share one bit width take a vectorised path that sums 32
// elements of up to 8 payloads in registers; it must give the contract's
// bits exactly (CUDA parity relies on it), across the 8-payload groups, for
// blocks of different sizes per payload and for lengths that are not a
// multiple of 32.
TEST(DecodeAccumulateTest, SameBitsPayloadsMatchContractBitForBit) {
  const int blocks[] = {128, 32, 96, 4096, 64};
  for (int bits : {2, 4, 8}) {
    for (size_t n : {size_t{1}, size_t{3}, size_t{8}, size_t{9}, size_t{17}}) {
      for (size_t length : {size_t{1}, size_t{31}, size_t{32}, size_t{1000}, size_t{4096 + 77}}) {
        SCOPED_TRACE(::testing::Message() << "bits " << bits << " n " << n << " length " << length);
        std::vector<OwnedPayload> ps;
        for (size_t k = 0; k < n; ++k) {
          ps.push_back(QuantPayload(RandomVector(length, static_cast<uint32_t>(100 * k + length + bits)),
                                    bits, blocks[k % 5]));
        }
        std::vector<PayloadView> views;
        for (const auto& p : ps) views.push_back(p.view());
        std::vector<float> out(length, -123.0f);
        ASSERT_TRUE(cpu::DecodeAccumulate(views.data(), n, length, out.data()).ok());
        const std::vector<float> want = ContractMeanFp32(ps, length);
        for (size_t i = 0; i < length; ++i) {
          uint32_t a, b;
          std::memcpy(&a, &out[i], 4);
          std::memcpy(&b, &want[i], 4);
          ASSERT_EQ(a, b) << "element " << i << ": " << out[i] << " vs " << want[i];
        }
      }
    }
  }
}

// The mean decoded in pieces (any lengths that are multiples of 32, the last
// one shorter) equals the whole call bit for bit: for one bit width (the
// register path, with 9 payloads to cross its 8-payload groups), for mixed
// codecs and blocks that straddle pieces (the tile path).
TEST(DecodeAccumulateTest, RangesEqualTheWholeMeanBitForBit) {
  const size_t length = 3 * 4096 + 32 * 7 + 19;
  std::vector<std::vector<OwnedPayload>> sets(2);
  for (uint32_t k = 0; k < 9; ++k) {
    sets[0].push_back(QuantPayload(RandomVector(length, 300 + k), 4, k % 2 ? 96 : 128));
  }
  sets[1].push_back(Fp32Payload(RandomVector(length, 310)));
  sets[1].push_back(Bf16Payload(RandomVector(length, 311)));
  sets[1].push_back(QuantPayload(RandomVector(length, 312), 2, 160));
  sets[1].push_back(QuantPayload(RandomVector(length, 313), 8, 4096));
  for (const auto& ps : sets) {
    std::vector<PayloadView> views;
    for (const auto& p : ps) views.push_back(p.view());
    std::vector<float> whole(length);
    ASSERT_TRUE(cpu::DecodeAccumulate(views.data(), views.size(), length, whole.data()).ok());
    for (size_t piece : {size_t{32}, size_t{96}, size_t{4096 + 64}, size_t{5000 * 32}}) {
      SCOPED_TRACE(piece);
      std::vector<float> out(length, -7.0f);
      for (size_t begin = 0; begin < length; begin += piece) {
        const size_t count = std::min(piece, length - begin);
        ASSERT_TRUE(cpu::DecodeAccumulateRange(views.data(), views.size(), length, begin, count,
                                               out.data() + begin)
                        .ok());
      }
      ASSERT_EQ(0, std::memcmp(out.data(), whole.data(), length * sizeof(float)));
    }
  }
}

TEST(DecodeAccumulateTest, RangeOutsideTheLengthOrMisalignedIsRefused) {
  const size_t length = 1000;
  const OwnedPayload p = QuantPayload(RandomVector(length, 9), 4, 128);
  const PayloadView v = p.view();
  std::vector<float> out(length, 5.0f);
  EXPECT_FALSE(cpu::DecodeAccumulateRange(&v, 1, length, 16, 32, out.data()).ok());
  EXPECT_FALSE(cpu::DecodeAccumulateRange(&v, 1, length, 992, 9, out.data()).ok());
  EXPECT_FALSE(cpu::DecodeAccumulateRange(&v, 1, length, 1024, 0, out.data()).ok());
  EXPECT_FALSE(cpu::DecodeAccumulateRange(&v, 0, length, 0, 32, out.data()).ok());
  EXPECT_FALSE(cpu::DecodeAccumulateRange(&v, 1, length, 0, 32, nullptr).ok());
  for (float x : out) ASSERT_EQ(x, 5.0f);
  EXPECT_TRUE(cpu::DecodeAccumulateRange(&v, 1, length, 992, 8, out.data()).ok());
}

TEST(DecodeAccumulateTest, EveryInvalidPayloadIsRejectedAndOutIsUntouched) {
  const size_t length = 300;
  const OwnedPayload good_q = QuantPayload(RandomVector(length, 1), 4, 128);
  const OwnedPayload good_f = Fp32Payload(RandomVector(length, 2));
  const OwnedPayload good_b = Bf16Payload(RandomVector(length, 3));

  struct Case {
    std::string name;
    OwnedPayload payload;
    std::string fragment;
  };
  std::vector<Case> cases;
  auto add = [&](std::string name, OwnedPayload p, std::string fragment) {
    cases.push_back({std::move(name), std::move(p), std::move(fragment)});
  };
  {
    OwnedPayload p = good_q;
    p.data.pop_back();
    add("codes one byte short", p, "data_bytes 149 != 150 expected for 300 elements");
  }
  {
    OwnedPayload p = good_q;
    p.data.push_back(0);
    add("codes one byte long", p, "data_bytes 151 != 150");
  }
  {
    OwnedPayload p = good_q;
    p.scales.pop_back();
    add("one scale missing", p, "num_scales 2 != 3");
  }
  {
    OwnedPayload p = good_q;
    p.scales[1] = std::numeric_limits<float>::quiet_NaN();
    add("NaN scale", p, "scale 1 is nan");
  }
  {
    OwnedPayload p = good_q;
    p.scales[2] = std::numeric_limits<float>::infinity();
    add("Inf scale", p, "scale 2 is inf");
  }
  {
    OwnedPayload p = good_q;
    p.scales[0] = -0.5f;
    add("negative scale", p, "scale 0 is -0.5 (scales must be finite and >= 0)");
  }
  {
    OwnedPayload p = good_q;
    p.bits = 3;
    add("bad bits", p, "bits 3 is not supported");
  }
  {
    OwnedPayload p = good_q;
    p.block_size = 100;
    add("bad block", p, "block_size 100 is not a multiple of 32");
  }
  {
    OwnedPayload p = good_f;
    float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(p.data.data() + 4 * 7, &nan, 4);
    add("NaN fp32", p, "fp32 payload element 7 is not finite");
  }
  {
    OwnedPayload p = good_f;
    float inf = -std::numeric_limits<float>::infinity();
    std::memcpy(p.data.data() + 4 * 299, &inf, 4);
    add("-Inf fp32", p, "fp32 payload element 299 is not finite");
  }
  {
    OwnedPayload p = good_f;
    p.data.resize(p.data.size() - 4);
    add("short fp32", p, "data_bytes 1196 != 1200");
  }
  {
    OwnedPayload p = good_b;
    p.data[2 * 9 + 1] = 0x7F;
    p.data[2 * 9] = 0xC0;
    add("NaN bf16", p, "bf16 payload element 9 is not finite");
  }
  {
    OwnedPayload p = good_b;
    p.data.push_back(0);
    add("long bf16", p, "data_bytes 601 != 600");
  }
  {
    OwnedPayload p = good_q;
    p.codec = static_cast<PayloadCodec>(5);
    add("unknown codec", p, "payload codec 5 is unknown");
  }

  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_FALSE(ValidatePayload(c.payload.view(), length).ok());
    // The bad payload comes last, after valid ones that would already have
    // been accumulated by a kernel that validated lazily.
    const std::vector<PayloadView> views = {good_q.view(), good_f.view(), c.payload.view()};
    std::vector<float> out(length);
    for (size_t i = 0; i < length; ++i) out[i] = static_cast<float>(i) * 0.5f - 3.0f;
    const std::vector<float> before = out;
    const Status st = cpu::DecodeAccumulate(views.data(), views.size(), length, out.data());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("payload 2"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(c.fragment), std::string::npos) << st.message();
    EXPECT_EQ(std::memcmp(out.data(), before.data(), length * sizeof(float)), 0);
  }

  std::vector<float> out(length, 1.0f);
  EXPECT_EQ(cpu::DecodeAccumulate(nullptr, 0, length, out.data()).code(), StatusCode::kInvalidArgument);
  const PayloadView v = good_q.view();
  EXPECT_FALSE(cpu::DecodeAccumulate(&v, 1, length, nullptr).ok());
  EXPECT_FALSE(cpu::DecodeAccumulate(&v, 1, length + 1, out.data()).ok());
  for (float x : out) ASSERT_EQ(x, 1.0f);
}

}  // namespace
}  // namespace loco

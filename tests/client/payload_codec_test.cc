// GradientEncoder (push side) and ApplyPulledParams (pull side).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cast.h"
#include "kernels/quantize.h"
#include "tests/common/random_batch.h"
#include "client/gradient_encoder.h"
#include "client/param_payload_decoder.h"
#include "client/worker_metrics.h"

namespace loco {
namespace {

std::vector<float> Decode(const v1::Payload& p) {
  std::vector<float> out(p.length());
  std::vector<float> scales(p.scales().size() / 4);
  std::memcpy(scales.data(), p.scales().data(), p.scales().size());
  Status s = cpu::Dequantize(reinterpret_cast<const uint8_t*>(p.data().data()), scales.data(),
                             p.length(), static_cast<int>(p.bits()),
                             static_cast<int>(p.block_size()), out.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(GradientEncoderTest, Fp32SendsRawValuesAndZeroesNonFinite) {
  WorkerOptions o;
  o.codec = PushCodec::kFp32;
  GradientEncoder enc(o, 1, 256, 5);
  const std::vector<float> g{1.5f, std::numeric_limits<float>::quiet_NaN(), -2.0f,
                             std::numeric_limits<float>::infinity(), 0.25f};
  v1::Payload p;
  EncodeStats st;
  ASSERT_TRUE(enc.Encode(g, 0, &p, &st).ok());
  EXPECT_EQ(st.nonfinite, 2u);
  EXPECT_EQ(p.codec(), v1::CODEC_FP32);
  EXPECT_EQ(p.offset(), 256u);
  EXPECT_EQ(p.length(), 5u);
  ASSERT_EQ(p.data().size(), 20u);
  std::vector<float> back(5);
  std::memcpy(back.data(), p.data().data(), 20);
  EXPECT_EQ(back, (std::vector<float>{1.5f, 0.0f, -2.0f, 0.0f, 0.25f}));
  EXPECT_EQ(enc.WireBytes(), 20u);
  EXPECT_FALSE(enc.Encode(std::vector<float>(4), 0, &p, &st).ok());
}

TEST(GradientEncoderTest, Bf16RoundsEveryElement) {
  WorkerOptions o;
  o.codec = PushCodec::kBf16;
  const std::vector<float> g = Gaussian(33, 1);
  GradientEncoder enc(o, 1, 0, g.size());
  v1::Payload p;
  EncodeStats st;
  ASSERT_TRUE(enc.Encode(g, 0, &p, &st).ok());
  ASSERT_EQ(p.data().size(), 66u);
  for (size_t i = 0; i < g.size(); ++i) {
    uint16_t b;
    std::memcpy(&b, p.data().data() + 2 * i, 2);
    EXPECT_EQ(b, Fp32ToBf16(g[i]));
  }
}

// The default block keeps a LoCo-4 push within 0.13x the fp32 bytes:
// 4-bit codes are 0.125x, one fp32 scale per block adds 1/B of that.
TEST(GradientEncoderTest, DefaultPushIsWithinThirteenPercentOfFp32Bytes) {
  const WorkerOptions o;
  const size_t n = size_t{1} << 20;
  GradientEncoder enc(o, 0, 0, n);
  EXPECT_EQ(o.codec, PushCodec::kLoco);
  EXPECT_EQ(o.bits, 4);
  EXPECT_LE(static_cast<double>(enc.WireBytes()) / (4.0 * n), 0.13);
  EXPECT_LE(static_cast<double>(enc.state_bytes()) / n, 1.1);
}

TEST(GradientEncoderTest, LocoPayloadSizeAccuracyAndCommittedErrorState) {
  WorkerOptions o;  // loco, 4 bits
  o.block_size = 128;
  const size_t n = 1000;
  const std::vector<float> g = Gaussian(n, 2);
  GradientEncoder enc(o, 3, 1024, n);
  const size_t blocks = (n + 127) / 128;
  EXPECT_EQ(enc.WireBytes(), n / 2 + 4 * blocks);

  v1::Payload first, again, after_commit;
  EncodeStats st;
  ASSERT_TRUE(enc.Encode(g, 0, &first, &st).ok());
  EXPECT_EQ(first.codec(), v1::CODEC_BLOCK_QUANT);
  EXPECT_EQ(first.bits(), 4u);
  EXPECT_EQ(first.block_size(), 128u);
  EXPECT_EQ(first.data().size() + first.scales().size(), enc.WireBytes());
  // First step: the error state is zero, so the payload is Q4(g): each
  // element within half a quantization step of g.
  const std::vector<float> d = Decode(first);
  for (size_t b = 0; b < blocks; ++b) {
    float mx = 0;
    for (size_t i = b * 128; i < std::min(n, (b + 1) * 128); ++i) mx = std::max(mx, std::abs(g[i]));
    const float step = mx / 7.0f;
    for (size_t i = b * 128; i < std::min(n, (b + 1) * 128); ++i) {
      ASSERT_LE(std::abs(d[i] - g[i]), 0.5f * step * 1.0001f) << i;
    }
  }
  EXPECT_GT(st.error_sq_norm, 0.0);
  // Not committed: encoding again restarts from a zero error state, here the
  // one the first Encode saw.
  ASSERT_TRUE(enc.Encode(g, 0, &again, &st).ok());
  EXPECT_EQ(again.data(), first.data());
  EXPECT_EQ(again.scales(), first.scales());
  // Committed: the compensation changes what is sent for the same gradient.
  enc.Commit();
  ASSERT_TRUE(enc.Encode(g, 1, &after_commit, &st).ok());
  EXPECT_NE(after_commit.data(), first.data());
}

// The error state is one copy, updated in place: 1 byte per element plus 4
// per block (<= 1.1 B/param at B = 128). A payload that was never accepted
// leaves no compensation behind: the state restarts from zero, whether the
// next Encode or Discard notices it.
TEST(GradientEncoderTest, UnconfirmedEncodeRestartsTheStateFromZeroAndStateIsOneCopy) {
  WorkerOptions o;  // loco, 4 bits, 8-bit error state
  o.block_size = 128;
  const size_t n = 1000;
  GradientEncoder enc(o, 3, 1024, n);
  EXPECT_EQ(enc.state_bytes(), n + 4 * ((n + 127) / 128));
  EXPECT_LE(static_cast<double>(enc.state_bytes()), 1.1 * n);
  WorkerOptions fp32 = o;
  fp32.codec = PushCodec::kFp32;
  EXPECT_EQ(GradientEncoder(fp32, 3, 1024, n).state_bytes(), 0u);

  v1::Payload p;
  EncodeStats st;
  ASSERT_TRUE(enc.Encode(Gaussian(n, 10), 0, &p, &st).ok());
  enc.Commit();
  ASSERT_TRUE(enc.Encode(Gaussian(n, 11), 1, &p, &st).ok());  // never confirmed
  v1::Payload after, fresh_payload;
  ASSERT_TRUE(enc.Encode(Gaussian(n, 12), 2, &after, &st).ok());
  GradientEncoder fresh(o, 3, 1024, n);  // a zero state
  ASSERT_TRUE(fresh.Encode(Gaussian(n, 12), 2, &fresh_payload, &st).ok());
  EXPECT_EQ(after.data(), fresh_payload.data());
  EXPECT_EQ(after.scales(), fresh_payload.scales());

  enc.Commit();
  ASSERT_TRUE(enc.Encode(Gaussian(n, 13), 3, &p, &st).ok());
  ASSERT_GT(st.error_sq_norm, 0.0);
  enc.Discard();
  for (int8_t c : enc.error_state().codes()) ASSERT_EQ(c, 0);
  for (float s : enc.error_state().scales()) ASSERT_EQ(s, 0.0f);
  enc.Discard();  // no-op
  // After Commit, Discard changes nothing.
  ASSERT_TRUE(enc.Encode(Gaussian(n, 14), 4, &p, &st).ok());
  enc.Commit();
  const std::vector<int8_t> kept = enc.error_state().codes();
  enc.Discard();
  EXPECT_EQ(enc.error_state().codes(), kept);
}

// The worker encodes into the same Payload every step; what it sends must
// not depend on what the message held before (a stale field or byte).
TEST(GradientEncoderTest, ReusedPayloadEqualsAFreshOneForEveryCodec) {
  for (const char* codec : {"fp32", "bf16", "loco"}) {
    SCOPED_TRACE(codec);
    WorkerOptions o;
    o.codec = ParsePushCodec(codec).value();
    const size_t n = 40000;  // several bf16 chunks and a partial last one
    GradientEncoder reused_enc(o, 5, 256, n), fresh_enc(o, 5, 256, n);
    v1::Payload reused;
    // Stale content of another kind and size first.
    reused.set_codec(v1::CODEC_BLOCK_QUANT);
    reused.set_bits(8);
    reused.set_block_size(64);
    reused.set_data(std::string(3 * n, '\x5a'));
    reused.set_scales(std::string(12, '\x01'));
    for (int64_t step = 0; step < 3; ++step) {
      std::vector<float> g = Gaussian(n, 30 + static_cast<uint64_t>(step));
      g[7] = std::numeric_limits<float>::quiet_NaN();
      v1::Payload fresh;
      EncodeStats a, b;
      ASSERT_TRUE(reused_enc.Encode(g, step, &reused, &a).ok());
      ASSERT_TRUE(fresh_enc.Encode(g, step, &fresh, &b).ok());
      EXPECT_EQ(reused.SerializeAsString(), fresh.SerializeAsString()) << "step " << step;
      EXPECT_EQ(a.nonfinite, 1u);
      EXPECT_EQ(b.nonfinite, 1u);
      reused_enc.Commit();
      fresh_enc.Commit();
    }
  }
}

// Encoding in parts (the end of the shard first, as a backward pass makes it
// final, or in any order) gives the payload, the error state and the stats
// of one Encode, bit for bit, for every codec and error-state kind; the
// stochastic rounding draws by element, so it agrees too.
TEST(GradientEncoderTest, EncodingInPartsEqualsOneEncodeForEveryCodec) {
  struct Case {
    const char* codec;
    int bits;
    int error_bits;
    bool stochastic;
  };
  for (const Case c : {Case{"loco", 4, 8, false}, Case{"loco", 2, 8, true},
                       Case{"loco", 8, 32, false}, Case{"ef", 4, 8, false},
                       Case{"naive", 4, 8, true}, Case{"fp32", 4, 8, false},
                       Case{"bf16", 4, 8, false}}) {
    SCOPED_TRACE(std::string(c.codec) + " bits " + std::to_string(c.bits) + " error_bits " +
                 std::to_string(c.error_bits) + (c.stochastic ? " stochastic" : ""));
    WorkerOptions o;
    o.codec = ParsePushCodec(c.codec).value();
    o.bits = c.bits;
    o.block_size = 128;
    o.error_bits = c.error_bits;
    o.stochastic_rounding = c.stochastic;
    o.reset_period = 3;
    const size_t n = 40000 + 77;  // a partial last block
    GradientEncoder whole(o, 5, 1024, n), parts(o, 5, 1024, n);
    const size_t align = parts.part_alignment();
    ASSERT_EQ(align, std::string(c.codec) == "fp32" || std::string(c.codec) == "bf16"
                         ? 1u : 128u);
    std::mt19937_64 rng(9);
    for (int64_t step = 0; step < 4; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      std::vector<float> g = Gaussian(n, 60 + static_cast<uint64_t>(step));
      g[n - 3] = std::numeric_limits<float>::infinity();
      g[5] = std::numeric_limits<float>::quiet_NaN();
      v1::Payload a, b;
      EncodeStats sa, sb;
      ASSERT_TRUE(whole.Encode(g, step, &a, &sa).ok());
      ASSERT_TRUE(parts.BeginEncode(step, &b).ok());
      // Cut points: aligned, at random; odd steps encode end first, even
      // steps in a shuffled order.
      std::vector<size_t> cuts{0, n};
      for (int k = 0; k < 9; ++k) cuts.push_back(rng() % (n / align) * align);
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      std::vector<std::pair<size_t, size_t>> ranges;
      for (size_t k = cuts.size() - 1; k > 0; --k) ranges.emplace_back(cuts[k - 1], cuts[k]);
      if (step % 2 == 0) std::shuffle(ranges.begin(), ranges.end(), rng);
      for (const auto& [begin, end] : ranges) {
        ASSERT_TRUE(parts.EncodeRange(g, begin, end, &b, &sb).ok());
      }
      EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
      EXPECT_EQ(sa.nonfinite, 2u);
      EXPECT_EQ(sb.nonfinite, sa.nonfinite);
      EXPECT_NEAR(sb.error_sq_norm, sa.error_sq_norm, 1e-9 * (1 + sa.error_sq_norm));
      // The block codecs measure the gradient's norm in their pass, whole
      // or in parts; the others leave it to the worker.
      if (align > 1) {
        const double want = FiniteSquaredNorm(g);
        ASSERT_TRUE(sa.grad_sq_norm.has_value());
        ASSERT_TRUE(sb.grad_sq_norm.has_value());
        EXPECT_NEAR(*sa.grad_sq_norm, want, 1e-5 * want);
        EXPECT_NEAR(*sb.grad_sq_norm, want, 1e-5 * want);
      } else {
        EXPECT_FALSE(sa.grad_sq_norm.has_value());
        EXPECT_FALSE(sb.grad_sq_norm.has_value());
      }
      EXPECT_EQ(parts.error_state().codes(), whole.error_state().codes());
      EXPECT_EQ(parts.error_state().scales(), whole.error_state().scales());
      EXPECT_EQ(parts.error_state().values(), whole.error_state().values());
      whole.Commit();
      parts.Commit();
    }
    // A range that is not aligned, or past the slice, is refused.
    v1::Payload p;
    EncodeStats st;
    ASSERT_TRUE(parts.BeginEncode(4, &p).ok());
    const std::vector<float> g(n, 0.5f);
    if (align > 1) {
      EXPECT_EQ(parts.EncodeRange(g, 1, n, &p, &st).code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(parts.EncodeRange(g, 0, 129, &p, &st).code(), StatusCode::kInvalidArgument);
    }
    EXPECT_EQ(parts.EncodeRange(g, 0, n + 1, &p, &st).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(parts.EncodeRange(std::span<const float>(g).first(n - 1), 0, 128, &p, &st).code(),
              StatusCode::kInvalidArgument);
  }
}

v1::PullResponse FullCopy(uint64_t offset, const std::vector<float>& v, uint64_t version) {
  v1::PullResponse r;
  r.set_version(version);
  v1::Payload* p = r.mutable_params();
  p->set_codec(v1::CODEC_FP32);
  p->set_offset(offset);
  p->set_length(v.size());
  p->set_data(reinterpret_cast<const char*>(v.data()), 4 * v.size());
  return r;
}

TEST(ApplyPulledParamsTest, FullCopyDeltaAndRejections) {
  const std::vector<float> master = Gaussian(300, 4);
  std::vector<float> slice(300, -1.0f);
  auto wire = ApplyPulledParams(FullCopy(128, master, 5), 128, false, 0, slice);
  ASSERT_TRUE(wire.ok()) << wire.status().ToString();
  EXPECT_EQ(*wire, 1200u);
  EXPECT_EQ(slice, master);

  // A delta to version 6 built with the quantizer; the worker adds D(delta).
  const std::vector<float> delta = Gaussian(300, 5);
  std::vector<uint8_t> codes(PackedBytes(300, 8));
  std::vector<float> scales(NumBlocks(300, 64));
  QuantizeStats qs;
  ASSERT_TRUE(cpu::Quantize(delta.data(), 300, QuantizeParams{8, 64}, codes.data(),
                            scales.data(), &qs).ok());
  std::vector<float> decoded(300);
  ASSERT_TRUE(cpu::Dequantize(codes.data(), scales.data(), 300, 8, 64, decoded.data()).ok());
  v1::PullResponse r;
  r.set_version(6);
  r.set_is_delta(true);
  v1::Payload* p = r.mutable_params();
  p->set_codec(v1::CODEC_BLOCK_QUANT);
  p->set_bits(8);
  p->set_block_size(64);
  p->set_offset(128);
  p->set_length(300);
  p->set_data(reinterpret_cast<const char*>(codes.data()), codes.size());
  p->set_scales(reinterpret_cast<const char*>(scales.data()), 4 * scales.size());

  // Wrong base version: rejected, slice untouched.
  EXPECT_FALSE(ApplyPulledParams(r, 128, true, 4, slice).ok());
  EXPECT_EQ(slice, master);
  wire = ApplyPulledParams(r, 128, true, 5, slice);
  ASSERT_TRUE(wire.ok()) << wire.status().ToString();
  EXPECT_EQ(*wire, codes.size() + 4 * scales.size());
  for (size_t i = 0; i < 300; ++i) EXPECT_EQ(slice[i], master[i] + decoded[i]) << i;

  // Wrong range, wrong size, non-finite values: rejected, slice untouched.
  const std::vector<float> before = slice;
  EXPECT_FALSE(ApplyPulledParams(FullCopy(0, master, 7), 128, true, 6, slice).ok());
  std::vector<float> shorter(master.begin(), master.end() - 1);
  EXPECT_FALSE(ApplyPulledParams(FullCopy(128, shorter, 7), 128, true, 6, slice).ok());
  std::vector<float> bad = master;
  bad[17] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(ApplyPulledParams(FullCopy(128, bad, 7), 128, true, 6, slice).ok());
  EXPECT_EQ(slice, before);
}

// The delta is applied in place in chunks; across several chunks and a
// partial last block it must equal the one-pass reference bit for bit.
TEST(ApplyPulledParamsTest, LargeDeltaMatchesOnePassDequantizeBitForBit) {
  const size_t n = 3 * 16384 + 1000;  // several chunks, a partial last block
  for (int bits : {2, 4, 8}) {
    const std::vector<float> base = Gaussian(n, 11);
    const std::vector<float> delta = Gaussian(n, 12 + bits);
    std::vector<uint8_t> codes(PackedBytes(n, bits));
    std::vector<float> scales(NumBlocks(n, 128));
    QuantizeStats qs;
    ASSERT_TRUE(cpu::Quantize(delta.data(), n, QuantizeParams{bits, 128}, codes.data(),
                              scales.data(), &qs).ok());
    std::vector<float> decoded(n);
    ASSERT_TRUE(cpu::Dequantize(codes.data(), scales.data(), n, bits, 128, decoded.data()).ok());
    v1::PullResponse r;
    r.set_version(3);
    r.set_is_delta(true);
    v1::Payload* p = r.mutable_params();
    p->set_codec(v1::CODEC_BLOCK_QUANT);
    p->set_bits(bits);
    p->set_block_size(128);
    p->set_offset(0);
    p->set_length(n);
    p->set_data(reinterpret_cast<const char*>(codes.data()), codes.size());
    p->set_scales(reinterpret_cast<const char*>(scales.data()), 4 * scales.size());
    std::vector<float> slice = base;
    auto wire = ApplyPulledParams(r, 0, true, 2, slice);
    ASSERT_TRUE(wire.ok()) << wire.status().ToString();
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(slice[i], base[i] + decoded[i]) << "bits " << bits << " element " << i;
    }
    // A non-finite scale in the last block: refused, slice untouched.
    const std::vector<float> before = slice;
    float inf = std::numeric_limits<float>::infinity();
    std::memcpy(p->mutable_scales()->data() + 4 * (scales.size() - 1), &inf, 4);
    r.set_version(4);
    EXPECT_EQ(ApplyPulledParams(r, 0, true, 3, slice).status().code(), StatusCode::kDataLoss);
    EXPECT_EQ(slice, before);
  }
}

// A bf16 copy is decoded straight into the slice, equal to the cast kernel;
// a non-finite bf16 value anywhere leaves the slice untouched.
TEST(ApplyPulledParamsTest, Bf16CopyMatchesCastAndRejectsNonFinite) {
  const size_t n = 40000;
  const std::vector<float> master = Gaussian(n, 21);
  std::vector<uint16_t> half(n);
  cpu::CastFp32ToBf16(master.data(), n, half.data());
  std::vector<float> expect(n);
  cpu::CastBf16ToFp32(half.data(), n, expect.data());
  v1::PullResponse r;
  r.set_version(9);
  v1::Payload* p = r.mutable_params();
  p->set_codec(v1::CODEC_BF16);
  p->set_offset(256);
  p->set_length(n);
  p->set_data(reinterpret_cast<const char*>(half.data()), 2 * n);
  std::vector<float> slice(n, 7.0f);
  auto wire = ApplyPulledParams(r, 256, true, 8, slice);
  ASSERT_TRUE(wire.ok()) << wire.status().ToString();
  EXPECT_EQ(*wire, 2 * n);
  EXPECT_EQ(slice, expect);
  const std::vector<float> before = slice;
  const uint16_t nan_bf16 = 0x7FC1, inf_bf16 = 0xFF80;
  for (uint16_t bad : {nan_bf16, inf_bf16}) {
    std::string data(reinterpret_cast<const char*>(half.data()), 2 * n);
    std::memcpy(data.data() + 2 * (n - 1), &bad, 2);
    p->set_data(data);
    EXPECT_EQ(ApplyPulledParams(r, 256, true, 8, slice).status().code(), StatusCode::kDataLoss);
    EXPECT_EQ(slice, before);
  }
}

}  // namespace
}  // namespace loco

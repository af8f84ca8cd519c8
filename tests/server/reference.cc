#include <gtest/gtest.h>

#include "tests/server/reference.h"

#include <cmath>
#include <cstring>

#include "kernels/quantize.h"

namespace loco::test {

ReferenceAdamW::ReferenceAdamW(const std::vector<float>& init, const AdamWParams& hyper)
    : h_(hyper), p_(init.begin(), init.end()), m_(init.size(), 0.0), v_(init.size(), 0.0) {}

void ReferenceAdamW::Step(const std::vector<double>& g) {
  ++t_;
  double scale = 1.0;
  if (h_.max_grad_norm > 0) {
    double sq = 0;
    for (double x : g) sq += x * x;
    scale = std::min(1.0, double(h_.max_grad_norm) / (std::sqrt(sq) + 1e-6));
  }
  const double lr = h_.lr, b1 = h_.beta1, b2 = h_.beta2, eps = h_.eps, wd = h_.weight_decay;
  const double bc1 = 1 - std::pow(b1, double(t_)), bc2 = 1 - std::pow(b2, double(t_));
  for (size_t i = 0; i < p_.size(); ++i) {
    const double gi = g[i] * scale;
    p_[i] *= 1 - lr * wd;
    m_[i] = b1 * m_[i] + (1 - b1) * gi;
    v_[i] = b2 * v_[i] + (1 - b2) * gi * gi;
    p_[i] -= lr * (m_[i] / bc1) / (std::sqrt(v_[i] / bc2) + eps);
  }
}

ReferenceGroupedAdamW::ReferenceGroupedAdamW(const std::vector<float>& init)
    : p_(init.begin(), init.end()), m_(init.size(), 0.0), v_(init.size(), 0.0) {}

void ReferenceGroupedAdamW::Step(const std::vector<double>& g, const std::vector<Group>& groups) {
  ++t_;
  size_t covered = 0;
  for (const Group& group : groups) {
    EXPECT_EQ(group.begin, covered) << "the groups must cover the vector in order";
    const double lr = group.hyper.lr, b1 = group.hyper.beta1, b2 = group.hyper.beta2;
    const double eps = group.hyper.eps, wd = group.hyper.weight_decay;
    const double bc1 = 1 - std::pow(b1, double(t_)), bc2 = 1 - std::pow(b2, double(t_));
    for (size_t i = group.begin; i < group.end; ++i) {
      p_[i] *= 1 - lr * wd;
      m_[i] = b1 * m_[i] + (1 - b1) * g[i];
      v_[i] = b2 * v_[i] + (1 - b2) * g[i] * g[i];
      p_[i] -= lr * (m_[i] / bc1) / (std::sqrt(v_[i] / bc2) + eps);
    }
    covered = group.end;
  }
  EXPECT_EQ(covered, p_.size()) << "the groups must cover the vector";
}

std::vector<float> RandomVector(size_t n, uint64_t seed, float scale) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = scale * (static_cast<float>(s >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f);
  }
  return v;
}

v1::Payload Fp32Payload(const std::vector<float>& values, uint64_t offset) {
  v1::Payload p;
  p.set_codec(v1::CODEC_FP32);
  p.set_offset(offset);
  p.set_length(values.size());
  p.set_data(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  return p;
}

v1::Payload QuantPayload(const std::vector<float>& values, uint64_t offset, int bits,
                         int block_size) {
  QuantizeParams q;
  q.bits = bits;
  q.block_size = block_size;
  std::string codes(PackedBytes(values.size(), bits), '\0');
  std::vector<float> scales(NumBlocks(values.size(), block_size));
  QuantizeStats stats;
  Status s = cpu::Quantize(values.data(), values.size(), q,
                           reinterpret_cast<uint8_t*>(codes.data()), scales.data(), &stats);
  EXPECT_TRUE(s.ok()) << s.ToString();
  v1::Payload p;
  p.set_codec(v1::CODEC_BLOCK_QUANT);
  p.set_bits(bits);
  p.set_block_size(block_size);
  p.set_offset(offset);
  p.set_length(values.size());
  p.set_scales(reinterpret_cast<const char*>(scales.data()), scales.size() * 4);
  p.set_data(codes);
  return p;
}

std::vector<float> FloatsOf(const std::string& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

std::vector<double> DecodeReference(const v1::Payload& p) {
  const size_t n = p.length();
  std::vector<double> out(n);
  if (p.codec() == v1::CODEC_FP32) {
    auto f = FloatsOf(p.data());
    for (size_t i = 0; i < n; ++i) out[i] = f[i];
    return out;
  }
  const auto scales = FloatsOf(p.scales());
  const int bits = static_cast<int>(p.bits());
  const auto* data = reinterpret_cast<const uint8_t*>(p.data().data());
  for (size_t i = 0; i < n; ++i) {
    const size_t bit = i * bits;
    int code = (data[bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
    if (code >= (1 << (bits - 1))) code -= 1 << bits;  // two's complement
    out[i] = static_cast<double>(static_cast<float>(code) * scales[i / p.block_size()]);
  }
  return out;
}

float RoundToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t lower = u & 0xFFFFu, upper = u >> 16;
  uint32_t r = upper;
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) ++r;
  r <<= 16;
  float f;
  std::memcpy(&f, &r, 4);
  return f;
}

::testing::AssertionResult AllNear(const std::vector<float>& actual,
                                   const std::vector<double>& expected, double rel) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != expected " << expected.size();
  }
  size_t failures = 0, first = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double tol = rel * std::max(1.0, std::fabs(expected[i]));
    const double err = std::fabs(double(actual[i]) - expected[i]);
    if (!(err <= tol)) {  // also catches NaN
      if (failures++ == 0) first = i;
    }
  }
  if (failures > 0) {
    return ::testing::AssertionFailure()
           << failures << " elements off; first: element " << first << " = " << actual[first]
           << " vs expected " << expected[first] << " (rel tolerance " << rel << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace loco::test

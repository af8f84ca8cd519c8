// ServerMetrics::HasNonFinite, which decides whether a refused push counts
// as `nonfinite`: NaN or infinity in the scales, or in fp32 or bf16 values;
// never in the codes of block quantization, which are not floats.
#include "server/server_metrics.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace loco {
namespace {

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

v1::Payload Payload(v1::Codec codec, std::string data, std::string scales = "") {
  v1::Payload p;
  p.set_codec(codec);
  p.set_data(std::move(data));
  p.set_scales(std::move(scales));
  return p;
}

TEST(ServerMetrics, NonFiniteIsFoundInFp32AndBf16ValuesAndInScalesOnly) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(ServerMetrics::HasNonFinite(Payload(v1::CODEC_FP32, Bytes<float>({1, -2, 3e38f}))));
  EXPECT_TRUE(ServerMetrics::HasNonFinite(Payload(v1::CODEC_FP32, Bytes<float>({1, nan}))));
  EXPECT_TRUE(ServerMetrics::HasNonFinite(Payload(v1::CODEC_FP32, Bytes<float>({-inf}))));
  // bf16: 0x7F7F is the largest finite value; 0x7F80 +inf, 0xFF80 -inf,
  // 0x7FC0 a NaN.
  EXPECT_FALSE(ServerMetrics::HasNonFinite(
      Payload(v1::CODEC_BF16, Bytes<uint16_t>({0x3F80, 0x7F7F, 0xFF7F}))));
  for (uint16_t bad : {uint16_t{0x7F80}, uint16_t{0xFF80}, uint16_t{0x7FC0}}) {
    EXPECT_TRUE(
        ServerMetrics::HasNonFinite(Payload(v1::CODEC_BF16, Bytes<uint16_t>({0x3F80, bad}))))
        << bad;
  }
  // Block quantization: the codes are bytes, whatever their pattern; the
  // scales are floats.
  const std::string codes(64, '\xFF');
  EXPECT_FALSE(
      ServerMetrics::HasNonFinite(Payload(v1::CODEC_BLOCK_QUANT, codes, Bytes<float>({0.5f}))));
  EXPECT_TRUE(ServerMetrics::HasNonFinite(
      Payload(v1::CODEC_BLOCK_QUANT, codes, Bytes<float>({0.5f, nan}))));
}

}  // namespace
}  // namespace loco

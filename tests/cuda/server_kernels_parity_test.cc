// Server-side kernels, CUDA against the CPU reference:
//   * DecodeAccumulate: within 2 ulp per element (both sum the payloads in
//     order in fp32 and scale by (float)(1/n), so 0 is what we expect; the
//     margin is the stated contract), and on invalid content the same status
//     as the CPU with `out` left untouched;
//   * AdamW over 10 steps: params, m and v within 4 ulp per element (same
//     operation order with IEEE div/sqrt on both sides; the tolerance is the
//     contract of kernels/adamw.h, not an observed drift);
//   * SquaredNorm: within 1e-12 relative (double sums in different orders);
//   * fp32 <-> bf16 casts: bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "kernels/adamw.h"
#include "kernels/cast.h"
#include "kernels/decode_accumulate.h"
#include "kernels/device.h"
#include "kernels/quantize.h"
#include "parity_inputs.h"

namespace loco {
namespace {

using testing::DeviceBuffer;
using testing::FloatBits;
using testing::WithinUlps;

constexpr uint64_t kDecodeUlps = 2;
constexpr uint64_t kAdamWUlps = 4;

std::vector<float> Normal(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// One payload held both on the host (for cpu::) and on the device (for cuda::).
struct TwinPayload {
  PayloadView host;
  PayloadView device;
  std::vector<uint8_t> data;
  std::vector<float> scales;
  std::unique_ptr<DeviceBuffer<uint8_t>> d_data;
  std::unique_ptr<DeviceBuffer<float>> d_scales;

  void Finish(PayloadCodec codec, int bits, int block) {
    host.codec = device.codec = codec;
    host.bits = device.bits = bits;
    host.block_size = device.block_size = block;
    d_data = std::make_unique<DeviceBuffer<uint8_t>>(data);
    d_scales = std::make_unique<DeviceBuffer<float>>(scales);
    host.data = data.data();
    host.data_bytes = device.data_bytes = data.size();
    host.scales = scales.data();
    host.num_scales = device.num_scales = scales.size();
    device.data = d_data->data();
    device.scales = codec == PayloadCodec::kBlockQuant ? d_scales->data() : nullptr;
    if (codec != PayloadCodec::kBlockQuant) host.scales = nullptr;
  }
  // Re-sends the host copy after a test edited it.
  void Sync() {
    d_data->Upload(data);
    d_scales->Upload(scales);
  }
};

std::unique_ptr<TwinPayload> Quantized(size_t n, int bits, int block, uint32_t seed) {
  auto t = std::make_unique<TwinPayload>();
  const std::vector<float> x = Normal(n, seed);
  t->data.resize(PackedBytes(n, bits));
  t->scales.resize(NumBlocks(n, block));
  QuantizeParams p;
  p.bits = bits;
  p.block_size = block;
  EXPECT_TRUE(cpu::Quantize(x.data(), n, p, t->data.data(), t->scales.data(), nullptr).ok());
  t->Finish(PayloadCodec::kBlockQuant, bits, block);
  return t;
}

std::unique_ptr<TwinPayload> Fp32(size_t n, uint32_t seed) {
  auto t = std::make_unique<TwinPayload>();
  const std::vector<float> x = Normal(n, seed);
  t->data.resize(n * 4);
  std::memcpy(t->data.data(), x.data(), n * 4);
  t->Finish(PayloadCodec::kFp32, 0, 0);
  return t;
}

std::unique_ptr<TwinPayload> Bf16(size_t n, uint32_t seed) {
  auto t = std::make_unique<TwinPayload>();
  const std::vector<float> x = Normal(n, seed);
  std::vector<uint16_t> b(n);
  cpu::CastFp32ToBf16(x.data(), n, b.data());
  t->data.resize(n * 2);
  std::memcpy(t->data.data(), b.data(), n * 2);
  t->Finish(PayloadCodec::kBf16, 0, 0);
  return t;
}

struct Accumulated {
  Status cpu_status, cuda_status;
  std::vector<float> cpu_out, cuda_out;
};

// Runs both implementations; out starts as a sentinel on both sides.
Accumulated RunBoth(const std::vector<std::unique_ptr<TwinPayload>>& ps, size_t length,
                    size_t count = SIZE_MAX) {
  std::vector<PayloadView> h, d;
  for (size_t i = 0; i < ps.size() && i < count; ++i) {
    const auto& p = ps[i];
    h.push_back(p->host);
    d.push_back(p->device);
  }
  Accumulated r;
  r.cpu_out.assign(length, -7.0f);
  r.cpu_status = cpu::DecodeAccumulate(h.data(), h.size(), length, r.cpu_out.data());
  DeviceBuffer<float> out(std::vector<float>(length, -7.0f));
  r.cuda_status = cuda::DecodeAccumulate(d.data(), d.size(), length, out.data(), nullptr);
  r.cuda_out = out.Download();
  return r;
}

TEST(CudaDecodeAccumulateParity, MixedCodecsWithinTolerance) {
  LOCO_REQUIRE_CUDA_DEVICE();
  for (size_t length : {size_t{1}, size_t{37}, size_t{4096 * 3 + 5}, size_t{100000}}) {
    SCOPED_TRACE("length " + std::to_string(length));
    std::vector<std::unique_ptr<TwinPayload>> ps;
    ps.push_back(Quantized(length, 4, 128, 1));
    ps.push_back(Quantized(length, 2, 64, 2));
    ps.push_back(Quantized(length, 8, 4096, 3));
    ps.push_back(Fp32(length, 4));
    ps.push_back(Bf16(length, 5));
    for (size_t w : {size_t{1}, size_t{4}, size_t{5}}) {
      const Accumulated r = RunBoth(ps, length, w);
      ASSERT_TRUE(r.cpu_status.ok()) << r.cpu_status.ToString();
      ASSERT_TRUE(r.cuda_status.ok()) << r.cuda_status.ToString();
      EXPECT_TRUE(WithinUlps(r.cpu_out, r.cuda_out, kDecodeUlps)) << "W = " << w;
    }
  }
}

TEST(CudaDecodeAccumulateParity, FourBitPayloadsWithinTolerance) {
  LOCO_REQUIRE_CUDA_DEVICE();
  const size_t length = 128 * 500 + 17;
  std::vector<std::unique_ptr<TwinPayload>> ps;
  for (uint32_t i = 0; i < 4; ++i) ps.push_back(Quantized(length, 4, 128, 10 + i));
  const Accumulated r = RunBoth(ps, length);
  ASSERT_TRUE(r.cpu_status.ok() && r.cuda_status.ok()) << r.cuda_status.ToString();
  EXPECT_TRUE(WithinUlps(r.cpu_out, r.cuda_out, kDecodeUlps));
}

// Bad content anywhere: the same status as the CPU, and out untouched.
TEST(CudaDecodeAccumulateParity, InvalidContentRejectedLikeCpu) {
  LOCO_REQUIRE_CUDA_DEVICE();
  const size_t length = 1000;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Corruption {
    int payload;  // 0: 4-bit, 1: fp32, 2: bf16
    const char* what;
  };
  for (const Corruption& c : {Corruption{0, "nan-scale"}, Corruption{0, "inf-scale"}, Corruption{0, "negative-scale"},
                              Corruption{1, "inf-data"}, Corruption{2, "nan-bf16"}, Corruption{0, "two-bad"}}) {
    SCOPED_TRACE(c.what);
    std::vector<std::unique_ptr<TwinPayload>> ps;
    ps.push_back(Quantized(length, 4, 128, 1));
    ps.push_back(Fp32(length, 2));
    ps.push_back(Bf16(length, 3));
    TwinPayload& t = *ps[static_cast<size_t>(c.payload)];
    const std::string what = c.what;
    if (what == "nan-scale") t.scales[3] = nan;
    if (what == "inf-scale") t.scales[7] = -inf;
    if (what == "negative-scale") t.scales[5] = -0.5f;
    if (what == "two-bad") t.scales[6] = nan, t.scales[2] = -1.0f;  // the first index is reported
    if (what == "inf-data") {
      std::memcpy(t.data.data() + 4 * 321, &inf, 4);
      std::memcpy(t.data.data() + 4 * 900, &nan, 4);
    }
    if (what == "nan-bf16") t.data[2 * 17 + 1] = 0xFF, t.data[2 * 17] = 0xC1;
    t.Sync();
    const Accumulated r = RunBoth(ps, length);
    ASSERT_FALSE(r.cpu_status.ok());
    EXPECT_EQ(r.cuda_status.code(), r.cpu_status.code());
    EXPECT_EQ(r.cuda_status.message(), r.cpu_status.message());
    EXPECT_EQ(r.cuda_out, std::vector<float>(length, -7.0f));
  }
}

// A payload with bad content before a payload with a bad shape: both sides
// report the first one in order.
TEST(CudaDecodeAccumulateParity, FirstBadPayloadWinsLikeCpu) {
  LOCO_REQUIRE_CUDA_DEVICE();
  const size_t length = 512;
  std::vector<std::unique_ptr<TwinPayload>> ps;
  ps.push_back(Quantized(length, 4, 128, 1));
  ps.push_back(Quantized(length, 4, 128, 2));
  ps.push_back(Quantized(length, 4, 128, 3));
  ps[1]->scales[0] = std::numeric_limits<float>::quiet_NaN();
  ps[1]->Sync();
  ps[2]->host.num_scales = ps[2]->device.num_scales = 3;
  Accumulated r = RunBoth(ps, length);
  ASSERT_FALSE(r.cpu_status.ok());
  EXPECT_EQ(r.cuda_status.message(), r.cpu_status.message());
  // And the other way round.
  ps[1]->scales[0] = 1.0f;
  ps[1]->Sync();
  ps[0]->host.data_bytes = ps[0]->device.data_bytes = 1;
  r = RunBoth(ps, length);
  ASSERT_FALSE(r.cpu_status.ok());
  EXPECT_EQ(r.cuda_status.message(), r.cpu_status.message());
  EXPECT_EQ(r.cuda_out, std::vector<float>(length, -7.0f));
}

TEST(CudaAdamWParity, TenStepsWithinTolerance) {
  LOCO_REQUIRE_CUDA_DEVICE();
  const size_t n = 100003;
  AdamWParams p;
  p.lr = 3e-3f;
  p.weight_decay = 0.1f;
  p.beta2 = 0.99f;
  std::vector<float> params = Normal(n, 1), m(n, 0.0f), v(n, 0.0f);
  DeviceBuffer<float> dp(params), dm(m), dv(v), dg(n);
  for (int64_t step = 1; step <= 10; ++step) {
    const std::vector<float> grad = Normal(n, 100 + static_cast<uint32_t>(step), 0.1f);
    const float grad_scale = step % 2 ? 1.0f : 0.5f;
    ASSERT_TRUE(cpu::AdamW(params.data(), m.data(), v.data(), grad.data(), n, step, p, grad_scale).ok());
    dg.Upload(grad);
    ASSERT_TRUE(cuda::AdamW(dp.data(), dm.data(), dv.data(), dg.data(), n, step, p, grad_scale, nullptr).ok());
  }
  EXPECT_TRUE(WithinUlps(params, dp.Download(), kAdamWUlps)) << "params";
  EXPECT_TRUE(WithinUlps(m, dm.Download(), kAdamWUlps)) << "m";
  EXPECT_TRUE(WithinUlps(v, dv.Download(), kAdamWUlps)) << "v";
}

TEST(CudaAdamWParity, SquaredNormWithinTolerance) {
  LOCO_REQUIRE_CUDA_DEVICE();
  for (size_t n : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
    const std::vector<float> x = Normal(n, 7, 3.0f);
    DeviceBuffer<float> dx(x);
    double gpu = -1.0;
    ASSERT_TRUE(cuda::SquaredNorm(dx.data(), n, &gpu, nullptr).ok());
    // Reference in long double, independent of either implementation's order.
    long double ref = 0.0L;
    for (float f : x) ref += static_cast<long double>(f) * f;
    EXPECT_NEAR(gpu, static_cast<double>(ref), 1e-12 * static_cast<double>(ref)) << n;
    EXPECT_NEAR(gpu, cpu::SquaredNorm(x.data(), n), 1e-12 * static_cast<double>(ref)) << n;
  }
}

TEST(CudaCastParity, Bf16BitIdentical) {
  LOCO_REQUIRE_CUDA_DEVICE();
  std::vector<float> x = Normal(70001, 3, 1e3f);
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                            1.00390625f, 1.01171875f, -3.3895314e38f};
  for (size_t i = 0; i < std::size(specials); ++i) x[i * 1000] = specials[i];
  std::mt19937 rng(4);
  for (size_t i = 20000; i < 30000; ++i) {  // arbitrary bit patterns, NaN payloads included
    const uint32_t u = rng();
    std::memcpy(&x[i], &u, 4);
  }
  const size_t n = x.size();
  std::vector<uint16_t> b(n);
  cpu::CastFp32ToBf16(x.data(), n, b.data());
  DeviceBuffer<float> dx(x);
  DeviceBuffer<uint16_t> db(n);
  ASSERT_TRUE(cuda::CastFp32ToBf16(dx.data(), n, db.data(), nullptr).ok());
  const std::vector<uint16_t> gpu_b = db.Download();
  EXPECT_EQ(gpu_b, b);

  std::vector<float> back(n);
  cpu::CastBf16ToFp32(b.data(), n, back.data());
  DeviceBuffer<float> dback(n);
  ASSERT_TRUE(cuda::CastBf16ToFp32(db.data(), n, dback.data(), nullptr).ok());
  EXPECT_EQ(FloatBits(dback.Download()), FloatBits(back));
}

}  // namespace
}  // namespace loco

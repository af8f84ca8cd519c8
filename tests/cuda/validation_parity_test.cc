// Invalid parameters are rejected by cuda:: exactly as by cpu:: (same code,
// same message), before any device memory is touched. The checks run on the
// host, so this test needs no GPU: without one, the cuda:: calls get host
// pointers that they must never dereference (a call that wrongly passed
// validation would answer Unavailable and fail the comparison); with one,
// they get real device buffers.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "kernels/adamw.h"
#include "kernels/decode_accumulate.h"
#include "kernels/device.h"
#include "kernels/loco_compress.h"
#include "kernels/quantize.h"

namespace loco {
namespace {

constexpr size_t kN = 256;

// Buffers of kN elements for each side: host for cpu::, device (or host,
// without a device) for cuda::.
struct Buffers {
  std::vector<float> f1, f2, f3, f4;
  std::vector<uint8_t> bytes;
  std::vector<int8_t> i8;
  std::unique_ptr<testing::DeviceBuffer<float>> df1, df2, df3, df4;
  std::unique_ptr<testing::DeviceBuffer<uint8_t>> dbytes;
  std::unique_ptr<testing::DeviceBuffer<int8_t>> di8;

  Buffers() : f1(kN), f2(kN), f3(kN), f4(kN), bytes(kN), i8(kN) {
    if (cuda::DeviceCount() > 0) {
      df1 = std::make_unique<testing::DeviceBuffer<float>>(kN);
      df2 = std::make_unique<testing::DeviceBuffer<float>>(kN);
      df3 = std::make_unique<testing::DeviceBuffer<float>>(kN);
      df4 = std::make_unique<testing::DeviceBuffer<float>>(kN);
      dbytes = std::make_unique<testing::DeviceBuffer<uint8_t>>(kN);
      di8 = std::make_unique<testing::DeviceBuffer<int8_t>>(kN);
    }
  }
  float* F(int i, bool device) {
    if (device && df1) return (i == 1 ? df1 : i == 2 ? df2 : i == 3 ? df3 : df4)->data();
    return (i == 1 ? f1 : i == 2 ? f2 : i == 3 ? f3 : f4).data();
  }
  uint8_t* B(bool device) { return device && dbytes ? dbytes->data() : bytes.data(); }
  int8_t* I8(bool device) { return device && di8 ? di8->data() : i8.data(); }
};

// Runs `call` for cpu (device = false) and cuda (device = true) and compares.
void ExpectSameRejection(const std::string& what, const std::function<Status(bool device)>& call) {
  SCOPED_TRACE(what);
  const Status c = call(false);
  const Status g = call(true);
  ASSERT_FALSE(c.ok()) << "the case is not invalid on the CPU";
  EXPECT_EQ(g.code(), c.code()) << g.ToString() << " vs " << c.ToString();
  EXPECT_EQ(g.message(), c.message());
}

TEST(CudaValidationParity, QuantizeAndDequantize) {
  Buffers b;
  auto quantize = [&](QuantizeParams p, size_t n, bool null_x) {
    return [&b, p, n, null_x](bool dev) {
      const float* x = null_x ? nullptr : b.F(1, dev);
      return dev ? cuda::Quantize(x, n, p, b.B(dev), b.F(2, dev), nullptr, nullptr)
                 : cpu::Quantize(x, n, p, b.B(dev), b.F(2, dev), nullptr);
    };
  };
  QuantizeParams p;
  for (int bits : {0, 3, 16}) {
    p = {};
    p.bits = bits;
    ExpectSameRejection("bits " + std::to_string(bits), quantize(p, kN, false));
  }
  for (int block : {0, 16, 48, 8192}) {
    p = {};
    p.block_size = block;
    ExpectSameRejection("block " + std::to_string(block), quantize(p, kN, false));
  }
  p = {};
  p.index_offset = 5;
  ExpectSameRejection("index_offset", quantize(p, kN, false));
  p = {};
  p.rounding = static_cast<Rounding>(7);
  ExpectSameRejection("rounding", quantize(p, kN, false));
  ExpectSameRejection("null x", quantize(QuantizeParams{}, kN, true));

  auto dequantize = [&](int bits, int block, bool null_codes) {
    return [&b, bits, block, null_codes](bool dev) {
      const uint8_t* codes = null_codes ? nullptr : b.B(dev);
      return dev ? cuda::Dequantize(codes, b.F(2, dev), kN, bits, block, b.F(1, dev), nullptr)
                 : cpu::Dequantize(codes, b.F(2, dev), kN, bits, block, b.F(1, dev));
    };
  };
  ExpectSameRejection("dequantize bits 5", dequantize(5, 128, false));
  ExpectSameRejection("dequantize block 0", dequantize(4, 0, false));
  ExpectSameRejection("dequantize null codes", dequantize(4, 128, true));
  auto dequantize_add = [&](int bits, int block, bool null_out) {
    return [&b, bits, block, null_out](bool dev) {
      float* out = null_out ? nullptr : b.F(1, dev);
      return dev ? cuda::DequantizeAdd(b.B(dev), b.F(2, dev), kN, bits, block, out, nullptr)
                 : cpu::DequantizeAdd(b.B(dev), b.F(2, dev), kN, bits, block, out);
    };
  };
  ExpectSameRejection("dequantize-add bits 5", dequantize_add(5, 128, false));
  ExpectSameRejection("dequantize-add block 4128", dequantize_add(4, 4128, false));
  ExpectSameRejection("dequantize-add null out", dequantize_add(4, 128, true));
}

TEST(CudaValidationParity, LocoCompress) {
  Buffers b;
  enum class Null { kNone, kG, kStateCodes, kStateValues };
  auto compress = [&](LocoParams p, int64_t step, Null null) {
    return [&b, p, step, null](bool dev) {
      ErrorStateView state;
      state.codes = null == Null::kStateCodes ? nullptr : b.I8(dev);
      state.scales = b.F(3, dev);
      state.values = null == Null::kStateValues ? nullptr : b.F(4, dev);
      const float* g = null == Null::kG ? nullptr : b.F(1, dev);
      return dev ? cuda::LocoCompress(g, kN, step, p, state, b.B(dev), b.F(2, dev), nullptr, nullptr)
                 : cpu::LocoCompress(g, kN, step, p, state, b.B(dev), b.F(2, dev), nullptr);
    };
  };
  LocoParams p;
  p.mode = static_cast<CompensationMode>(9);
  ExpectSameRejection("mode", compress(p, 0, Null::kNone));
  for (float beta : {-0.1f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    p = {};
    p.beta = beta;
    ExpectSameRejection("beta", compress(p, 0, Null::kNone));
  }
  p = {};
  p.reset_period = -1;
  ExpectSameRejection("reset_period", compress(p, 0, Null::kNone));
  p = {};
  p.mode = CompensationMode::kEf;
  p.error_bits = 16;
  ExpectSameRejection("error_bits", compress(p, 0, Null::kNone));
  p = {};
  p.bits = 3;
  ExpectSameRejection("bits", compress(p, 0, Null::kNone));
  p = {};
  p.index_offset = 64;
  ExpectSameRejection("index_offset", compress(p, 0, Null::kNone));
  ExpectSameRejection("negative step", compress(LocoParams{}, -1, Null::kNone));
  ExpectSameRejection("null g", compress(LocoParams{}, 0, Null::kG));
  ExpectSameRejection("null state codes", compress(LocoParams{}, 0, Null::kStateCodes));
  p = {};
  p.error_bits = 32;
  ExpectSameRejection("null state values", compress(p, 0, Null::kStateValues));
}

TEST(CudaValidationParity, AdamW) {
  Buffers b;
  auto adamw = [&](AdamWParams p, int64_t step, float grad_scale, bool null_params) {
    return [&b, p, step, grad_scale, null_params](bool dev) {
      float* params = null_params ? nullptr : b.F(1, dev);
      return dev ? cuda::AdamW(params, b.F(2, dev), b.F(3, dev), b.F(4, dev), kN, step, p, grad_scale, nullptr)
                 : cpu::AdamW(params, b.F(2, dev), b.F(3, dev), b.F(4, dev), kN, step, p, grad_scale);
    };
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<std::string, std::function<void(AdamWParams&)>>> bad = {
      {"lr", [](AdamWParams& p) { p.lr = -1.0f; }},
      {"beta1", [](AdamWParams& p) { p.beta1 = 1.0f; }},
      {"beta2", [](AdamWParams& p) { p.beta2 = -0.1f; }},
      {"eps", [](AdamWParams& p) { p.eps = 0.0f; }},
      {"weight_decay", [nan](AdamWParams& p) { p.weight_decay = nan; }},
      {"lr*wd", [](AdamWParams& p) { p.lr = 2.0f, p.weight_decay = 1.0f; }},
      {"max_grad_norm", [](AdamWParams& p) { p.max_grad_norm = -1.0f; }},
  };
  for (const auto& [name, edit] : bad) {
    AdamWParams p;
    edit(p);
    ExpectSameRejection(name, adamw(p, 1, 1.0f, false));
  }
  ExpectSameRejection("step 0", adamw(AdamWParams{}, 0, 1.0f, false));
  ExpectSameRejection("grad_scale NaN", adamw(AdamWParams{}, 1, nan, false));
  ExpectSameRejection("grad_scale negative", adamw(AdamWParams{}, 1, -1.0f, false));
  ExpectSameRejection("null params", adamw(AdamWParams{}, 1, 1.0f, true));

  // The form with validated hyper-parameters checks the call alike.
  const StatusOr<ValidatedAdamWParams> valid = ValidatedAdamWParams::Validate(AdamWParams{});
  ASSERT_TRUE(valid.ok());
  auto adamw_valid = [&](int64_t step, float grad_scale, bool null_params) {
    return [&b, &valid, step, grad_scale, null_params](bool dev) {
      float* params = null_params ? nullptr : b.F(1, dev);
      return dev ? cuda::AdamW(params, b.F(2, dev), b.F(3, dev), b.F(4, dev), kN, step,
                               valid.value(), grad_scale, nullptr)
                 : cpu::AdamW(params, b.F(2, dev), b.F(3, dev), b.F(4, dev), kN, step,
                              valid.value(), grad_scale);
    };
  };
  ExpectSameRejection("validated, step 0", adamw_valid(0, 1.0f, false));
  ExpectSameRejection("validated, grad_scale NaN", adamw_valid(1, nan, false));
  ExpectSameRejection("validated, null params", adamw_valid(1, 1.0f, true));
}

// Payload shapes are checked on the host before anything else.
TEST(CudaValidationParity, DecodeAccumulateShapes) {
  Buffers b;
  auto run = [&](std::function<void(PayloadView&)> edit, size_t n_payloads, bool null_out) {
    return [&b, edit, n_payloads, null_out](bool dev) {
      PayloadView p;
      p.bits = 4;
      p.block_size = 128;
      p.data = b.B(dev);
      p.data_bytes = PackedBytes(kN, 4);
      p.scales = b.F(2, dev);
      p.num_scales = NumBlocks(kN, 128);
      edit(p);
      std::vector<PayloadView> ps(n_payloads, p);
      float* out = null_out ? nullptr : b.F(1, dev);
      return dev ? cuda::DecodeAccumulate(ps.data(), ps.size(), kN, out, nullptr)
                 : cpu::DecodeAccumulate(ps.data(), ps.size(), kN, out);
    };
  };
  auto none = [](PayloadView&) {};
  ExpectSameRejection("no payloads", run(none, 0, false));
  ExpectSameRejection("null out", run(none, 2, true));
  ExpectSameRejection("codec", run([](PayloadView& p) { p.codec = static_cast<PayloadCodec>(7); }, 2, false));
  ExpectSameRejection("bits", run([](PayloadView& p) { p.bits = 3; }, 1, false));
  ExpectSameRejection("block", run([](PayloadView& p) { p.block_size = 100; }, 1, false));
  ExpectSameRejection("data_bytes", run([](PayloadView& p) { p.data_bytes += 1; }, 3, false));
  ExpectSameRejection("num_scales", run([](PayloadView& p) { p.num_scales = 1; }, 1, false));
  ExpectSameRejection("null scales", run([](PayloadView& p) { p.scales = nullptr; }, 1, false));
  ExpectSameRejection("fp32 size", run([](PayloadView& p) { p.codec = PayloadCodec::kFp32; }, 1, false));
  ExpectSameRejection("bf16 null data", run([](PayloadView& p) {
    p.codec = PayloadCodec::kBf16;
    p.data_bytes = 2 * kN;
    p.data = nullptr;
  }, 1, false));
}

}  // namespace
}  // namespace loco

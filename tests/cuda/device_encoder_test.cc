// DeviceGradientEncoder (client/device_gradient_encoder.h) against the host
// GradientEncoder, and a Worker whose gradients are on the device against a
// Worker whose gradients are on the host, on real loopback servers.
//
// Also the CUDA MLP's layer-by-layer report of a gradient kept on the device
// (what lets the shards' compression start during the backward pass).
//
// Expectations, all independent of the device code: the host encoder's
// payload bytes (equal bit for bit: the CUDA kernels match the CPU's codes
// and scales under nearest rounding), its non-finite count, and a double
// sum for the gradient norm (relative 1e-9). Every test skips without a
// CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "server/coordinator/coordinator_server.h"
#include "server/parameter_server.h"
#include "tests/cuda/device_buffer.h"
#include "tests/common/random_batch.h"
#include "client/device_gradient_encoder.h"
#include "client/gradient_encoder.h"
#include "models/mlp.h"
#include "models/mlp_cuda.h"
#include "client/worker.h"

namespace loco {
namespace {

using testing::DeviceBuffer;

std::vector<float> Gradient(size_t n, uint32_t seed, bool with_nonfinite) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1e-2f);
  std::vector<float> g(n);
  for (float& x : g) x = normal(rng);
  if (with_nonfinite) {
    g[3] = std::numeric_limits<float>::quiet_NaN();
    g[n / 2] = std::numeric_limits<float>::infinity();
  }
  return g;
}

void ExpectSamePayload(const v1::Payload& want, const v1::Payload& got) {
  EXPECT_EQ(want.codec(), got.codec());
  EXPECT_EQ(want.bits(), got.bits());
  EXPECT_EQ(want.block_size(), got.block_size());
  EXPECT_EQ(want.offset(), got.offset());
  EXPECT_EQ(want.length(), got.length());
  EXPECT_TRUE(want.data() == got.data()) << "data differs";
  EXPECT_TRUE(want.scales() == got.scales()) << "scales differ";
}

struct Case {
  std::string codec;
  int error_bits;
};

TEST(DeviceGradientEncoderTest, PayloadsEqualTheHostEncodersStepAfterStep) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const size_t offset = 256, length = 5 * 128 + 77;
  for (const Case& c : {Case{"loco", 8}, Case{"loco", 32}, Case{"ef", 8}, Case{"naive", 8},
                        Case{"fp32", 8}, Case{"bf16", 8}}) {
    SCOPED_TRACE(c.codec + " error_bits " + std::to_string(c.error_bits));
    WorkerOptions o;
    o.codec = ParsePushCodec(c.codec).value();
    o.error_bits = c.error_bits;
    o.reset_period = 3;
    GradientEncoder host(o, 7, offset, length);
    auto device = DeviceGradientEncoder::Create(o, 7, offset, length, 0);
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    EXPECT_EQ((*device)->state_bytes(), host.state_bytes());
    EXPECT_EQ((*device)->WireBytes(), host.WireBytes());
    v1::Payload want, got;
    for (int64_t step = 0; step < 5; ++step) {
      SCOPED_TRACE(step);
      const std::vector<float> g = Gradient(length, static_cast<uint32_t>(step), step == 1);
      DeviceBuffer<float> dg(g);
      ASSERT_TRUE(dg.ok());
      EncodeStats hs, ds;
      ASSERT_TRUE(host.Encode(g, step, &want, &hs).ok());
      ASSERT_TRUE((*device)->Encode({dg.data(), length}, step, &got, &ds).ok());
      ExpectSamePayload(want, got);
      EXPECT_EQ(hs.nonfinite, ds.nonfinite);
      EXPECT_NEAR(ds.error_sq_norm, hs.error_sq_norm, 1e-6 * (1 + hs.error_sq_norm));
      ASSERT_TRUE(ds.grad_sq_norm.has_value());
      if (step == 1) {
        EXPECT_FALSE(std::isfinite(*ds.grad_sq_norm));
      } else {
        double sq = 0;
        for (float x : g) sq += static_cast<double>(x) * x;
        EXPECT_NEAR(*ds.grad_sq_norm, sq, 1e-9 * sq);
      }
      // Step 2's push is refused: both states restart from zero.
      if (step == 2) {
        host.Discard();
        (*device)->Discard();
      } else {
        host.Commit();
        (*device)->Commit();
      }
    }
  }
}

TEST(DeviceGradientEncoderTest, WrongSizeIsRefused) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  WorkerOptions o;
  auto device = DeviceGradientEncoder::Create(o, 1, 0, 256, 0);
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  DeviceBuffer<float> dg(255);
  v1::Payload p;
  EncodeStats s;
  EXPECT_EQ((*device)->Encode({dg.data(), 255}, 0, &p, &s).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(DeviceGradientEncoder::Create(o, 1, 0, 256, cuda::DeviceCount()).ok());
}

// Kept on the device, the gradient equals the host-facing call's bit for
// bit; `ready` reports the same offsets as the CPU Mlp (last layer first),
// and at each report the suffix from that offset is already final.
TEST(DeviceGradientMlpTest, ReportsFinalSuffixesLikeTheCpuMlp) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::vector<size_t> sizes{37, 64, 48, 10};
  auto cpu = Mlp::Create(sizes);
  ASSERT_TRUE(cpu.ok());
  auto gpu = CudaMlp::Create(sizes, 0, 64);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  const std::vector<float> params = cpu->InitialParameters(9);
  const RandomBatchData b = RandomBatch(33, 37, 10, 11);
  std::vector<size_t> want_offsets;
  std::vector<float> cpu_grads;
  ASSERT_TRUE(cpu->LossAndGradient(params, b.images, b.labels, &cpu_grads,
                                   [&](size_t from) { want_offsets.push_back(from); })
                  .ok());
  std::vector<float> host;
  ASSERT_TRUE((*gpu)->LossAndGradient(params, b.images, b.labels, &host).ok());

  const size_t n = (*gpu)->num_parameters();
  std::vector<size_t> offsets;
  std::vector<std::vector<float>> seen;
  auto loss = (*gpu)->LossAndGradientKeptOnDevice(params, b.images, b.labels, [&](size_t from) {
    offsets.push_back(from);
    std::vector<float> suffix(n - from);
    ASSERT_EQ(cudaMemcpy(suffix.data(), (*gpu)->device_gradients().data() + from,
                         suffix.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    seen.push_back(std::move(suffix));
  });
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  EXPECT_EQ(offsets, want_offsets);
  std::vector<float> final_grads(n);
  ASSERT_EQ(cudaMemcpy(final_grads.data(), (*gpu)->device_gradients().data(), n * sizeof(float),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(final_grads, host);
  for (size_t k = 0; k < offsets.size(); ++k) {
    EXPECT_TRUE(std::equal(seen[k].begin(), seen[k].end(), final_grads.begin() + offsets[k]))
        << "the suffix from " << offsets[k] << " changed after it was reported";
  }
}

// One worker, two shards, LoCo-4 with the delta return: a worker fed the
// gradient in device memory ends with the same parameters, bit for bit, as
// one fed the same gradient in host memory.
std::vector<float> Train(bool on_device) {
  constexpr size_t kElements = 3000;
  constexpr uint32_t kShards = 2;
  CoordinatorServerOptions co;
  co.security = TransportSecurityOptions::Insecure();  // loopback
  co.coordinator.membership.num_shards = kShards;
  co.coordinator.membership.shard_align = 128;
  CoordinatorServer coordinator(co);
  EXPECT_TRUE(coordinator.Start().ok());
  std::vector<std::unique_ptr<ParameterServer>> servers;
  for (uint32_t k = 0; k < kShards; ++k) {
    ParameterServerOptions po;
    po.security = TransportSecurityOptions::Insecure();
    po.coordinator = coordinator.address();
    po.num_servers = kShards;
    po.shard.shard_id = k;
    po.shard.hyper.lr = 1e-2f;
    po.shard.return_path.codec = PullCodec::kDelta;
    servers.push_back(std::make_unique<ParameterServer>(po));
    EXPECT_TRUE(servers.back()->Start().ok());
  }
  WorkerOptions o;
  o.security = TransportSecurityOptions::Insecure();
  o.coordinator = coordinator.address();
  o.codec = PushCodec::kLoco;
  o.block_size = 128;  // divides the shard alignment above
  o.gradient_device = on_device ? 0 : -1;
  o.join_timeout_ms = o.step_timeout_ms = 20000;
  std::vector<float> params(kElements, 0.5f);
  {
    auto w = Worker::Connect(o);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    if (!w.ok()) return {};
    EXPECT_TRUE((*w)->Join(kElements).ok());
    std::vector<float> init = params;
    EXPECT_TRUE((*w)->InitParameters(init, &params).ok());
    DeviceBuffer<float> dg(kElements);
    for (uint32_t t = 0; t < 4; ++t) {
      const std::vector<float> g = Gradient(kElements, 100 + t, false);
      StatusOr<StepResult> r = Internal("not run");
      if (on_device) {
        dg.Upload(g);
        EXPECT_TRUE(dg.ok());
        r = (*w)->Step({dg.data(), kElements}, &params);
      } else {
        r = (*w)->Step(g, &params);
      }
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    }
    EXPECT_TRUE((*w)->Leave().ok());
  }
  for (auto& s : servers) s->Shutdown(std::chrono::milliseconds(500));
  coordinator.Shutdown(std::chrono::milliseconds(500));
  return params;
}

TEST(DeviceGradientWorkerTest, TrainsLikeAHostGradientWorkerBitForBit) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::vector<float> host = Train(false);
  const std::vector<float> device = Train(true);
  ASSERT_EQ(host.size(), 3000u);
  ASSERT_EQ(device.size(), host.size());
  for (size_t i = 0; i < host.size(); ++i) ASSERT_EQ(device[i], host[i]) << "element " << i;
  EXPECT_NE(host[0], 0.5f);  // it trained
}

}  // namespace
}  // namespace loco

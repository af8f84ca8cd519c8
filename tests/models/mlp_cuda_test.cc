// CudaMlp against the CPU Mlp (the reference): same loss and gradient at a
// relative tolerance of 1e-4 of the gradient's largest element (the device
// sums the products in another order). GPU tests skip without a device;
// without one, Create must say why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "tests/common/random_batch.h"
#include "tests/common/run_command.h"
#include "models/mlp.h"
#include "models/mlp_cuda.h"

namespace loco {
namespace {

using Batch = RandomBatchData;

TEST(CudaMlpTest, CreateSaysWhyWithoutADevice) {
  if (cuda::DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  auto m = CudaMlp::Create({784, 64, 10}, 0, 32);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().code() == StatusCode::kUnavailable ||
              m.status().code() == StatusCode::kUnimplemented)
      << m.status().ToString();
  EXPECT_FALSE(m.status().message().empty());
}

// Where loco-worker is: $LOCO_BIN_DIR when set (bench/gpu.sh runs binaries
// built on another machine), else this build's bin folder.
std::string BinDir() {
  const char* from_environment = std::getenv("LOCO_BIN_DIR");
  return from_environment != nullptr && *from_environment != '\0' ? from_environment
                                                                   : LOCO_BIN_DIR;
}

// loco-worker's --device cuda: refused, with a message and exit status 2,
// when there are fewer CUDA devices than local ranks, or for the char LM.
int RunWorker(const std::string& args, std::string* output) {
  const std::string command = "timeout 20 " + BinDir() +
                              "/loco-worker --insecure --coordinator=127.0.0.1:1 --steps=1 " +
                              args + " 2>&1";
  return RunCommand(command, output);
}

TEST(CudaMlpTest, WorkerRefusesDeviceCudaItCannotServe) {
  const int devices = cuda::DeviceCount();
  std::string out;
  EXPECT_EQ(RunWorker("--device=cuda --local-devices=" + std::to_string(devices + 1), &out), 2)
      << out;
  EXPECT_NE(out.find("needs that many CUDA devices"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunWorker("--device=cuda --model=charlm", &out), 2) << out;
  EXPECT_NE(out.find("--model mlp only"), std::string::npos) << out;
  // The NCCL group reduces on CUDA devices, in builds that have NCCL.
  out.clear();
  EXPECT_EQ(RunWorker("--device=cpu --local-devices=2 --local-group=nccl", &out), 2) << out;
  EXPECT_NE(out.find("--local-group nccl needs --device cuda"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunWorker("--local-group=mpi", &out), 2) << out;
  EXPECT_NE(out.find("local-group"), std::string::npos) << out;
}

TEST(CudaMlpTest, LossAndGradientMatchTheCpuMlp) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::vector<size_t> sizes{37, 64, 48, 10};
  auto cpu = Mlp::Create(sizes);
  ASSERT_TRUE(cpu.ok());
  auto gpu = CudaMlp::Create(sizes, 0, 64);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  ASSERT_EQ((*gpu)->num_parameters(), cpu->num_parameters());
  const std::vector<float> params = cpu->InitialParameters(7);
  for (size_t n : {size_t{1}, size_t{33}, size_t{64}}) {
    SCOPED_TRACE("batch " + std::to_string(n));
    const Batch b = RandomBatch(n, 37, 10, 100 + n);
    std::vector<float> want, got;
    auto loss_cpu = cpu->LossAndGradient(params, b.images, b.labels, &want);
    auto loss_gpu = (*gpu)->LossAndGradient(params, b.images, b.labels, &got);
    ASSERT_TRUE(loss_cpu.ok());
    ASSERT_TRUE(loss_gpu.ok()) << loss_gpu.status().ToString();
    EXPECT_NEAR(*loss_gpu, *loss_cpu, 1e-5 * std::abs(*loss_cpu));
    ASSERT_EQ(got.size(), want.size());
    float largest = 0;
    for (float g : want) largest = std::max(largest, std::abs(g));
    ASSERT_GT(largest, 0.0f);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4f * largest) << "element " << i;
    }
  }
}

TEST(CudaMlpTest, EvaluateMatchesTheCpuMlpAndBadBatchesAreRefused) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::vector<size_t> sizes{20, 32, 10};
  auto cpu = Mlp::Create(sizes);
  ASSERT_TRUE(cpu.ok());
  auto gpu = CudaMlp::Create(sizes, 0, 16);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  const std::vector<float> params = cpu->InitialParameters(3);
  const Batch b = RandomBatch(100, 20, 10, 5);  // several device batches of 16
  auto want = cpu->Evaluate(params, b.images, b.labels);
  auto got = (*gpu)->Evaluate(params, b.images, b.labels);
  ASSERT_TRUE(want.ok());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_NEAR(got->loss, want->loss, 1e-5 * want->loss);
  EXPECT_NEAR(got->accuracy, want->accuracy, 0.011);  // at most one near-tie flips

  std::vector<float> grads;
  const Batch big = RandomBatch(17, 20, 10, 6);  // over max_batch
  EXPECT_EQ((*gpu)->LossAndGradient(params, big.images, big.labels, &grads).status().code(),
            StatusCode::kInvalidArgument);
  Batch bad = RandomBatch(4, 20, 10, 7);
  bad.labels[2] = 10;  // not a class
  EXPECT_EQ((*gpu)->LossAndGradient(params, bad.images, bad.labels, &grads).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loco

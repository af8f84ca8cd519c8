// Independent references for the server tests: double-precision AdamW,
// payload builders and a payload decoder written from the wire layout
// (kernels/quantize.h), not from the kernels.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/adamw.h"
#include "proto/loco.pb.h"

namespace loco::test {

// AdamW in double, PyTorch ordering (kernels/adamw.h).
class ReferenceAdamW {
 public:
  ReferenceAdamW(const std::vector<float>& init, const AdamWParams& hyper);
  // One step with gradient g; clipping by ||g|| when hyper.max_grad_norm > 0.
  void Step(const std::vector<double>& g);
  const std::vector<double>& params() const { return p_; }

 private:
  AdamWParams h_;
  std::vector<double> p_, m_, v_;
  int64_t t_ = 0;
};

// AdamW in double whose hyper-parameters are given per stretch of the
// vector at every step (a step's groups; no clipping): what a shard steps
// with when its pushes carry hyper-parameters. The values are read as
// given (a test passes the fp32 values the server applies).
class ReferenceGroupedAdamW {
 public:
  struct Group {
    size_t begin = 0, end = 0;  // indices into the vector, [begin, end)
    AdamWParams hyper;
  };
  explicit ReferenceGroupedAdamW(const std::vector<float>& init);
  // One step with gradient g; the groups must cover the vector.
  void Step(const std::vector<double>& g, const std::vector<Group>& groups);
  const std::vector<double>& params() const { return p_; }
  const std::vector<double>& m() const { return m_; }
  const std::vector<double>& v() const { return v_; }

 private:
  std::vector<double> p_, m_, v_;
  int64_t t_ = 0;
};

// Deterministic pseudo-random values in [-scale, scale].
std::vector<float> RandomVector(size_t n, uint64_t seed, float scale = 1.0f);

v1::Payload Fp32Payload(const std::vector<float>& values, uint64_t offset);
// Quantized with cpu::Quantize (nearest rounding).
v1::Payload QuantPayload(const std::vector<float>& values, uint64_t offset, int bits,
                         int block_size);
// code * scale per element, decoded from the wire bytes by the test itself.
std::vector<double> DecodeReference(const v1::Payload& p);
// fp32 -> bf16 -> fp32 with round-to-nearest-even, computed by the test.
float RoundToBf16(float x);
std::vector<float> FloatsOf(const std::string& bytes);

// |a - b| <= rel * max(1, |b|) for every element; reports the worst index.
::testing::AssertionResult AllNear(const std::vector<float>& actual,
                                   const std::vector<double>& expected, double rel);

}  // namespace loco::test

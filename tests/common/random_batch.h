// Random test data, deterministic for a seed: a batch of Gaussian inputs and
// uniform labels for the MLP tests (CPU and CUDA), Gaussian vectors for the
// payload tests and uniform ones for the worker's cluster tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace loco {

struct RandomBatchData {
  std::vector<float> images;    // n × inputs, row-major
  std::vector<uint8_t> labels;  // n, each in [0, classes)
};

// n draws from N(0, 1).
inline std::vector<float> Gaussian(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = g(rng);
  return v;
}

// n draws from U(lo, hi).
inline std::vector<float> Uniform(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

inline RandomBatchData RandomBatch(size_t n, size_t inputs, size_t classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  RandomBatchData b;
  for (size_t i = 0; i < n * inputs; ++i) b.images.push_back(g(rng));
  for (size_t i = 0; i < n; ++i) b.labels.push_back(static_cast<uint8_t>(rng() % classes));
  return b;
}

}  // namespace loco

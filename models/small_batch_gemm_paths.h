// The vector paths behind SmallBatchGemm, one set per ISA, and the plain
// loops they must match bit for bit (contract: models/small_batch_gemm.h).
// Internal to models/.
//
// Preconditions of each: those of the SmallBatchGemm method of the same
// name, and for the vector paths a CPU that runs the ISA
// (SmallBatchGemm::Runs). `transposed` and `staged` are scratch, resized
// as needed. On platforms without the x86 paths the vector entry points
// run the plain loops.
#pragma once

#include <cstddef>
#include <vector>

namespace loco::small_batch {

void ForwardAvx512(const float* x, size_t n, const float* w, size_t o, size_t i, float* out,
                   std::vector<float>* transposed, std::vector<float>* staged);
void WeightGradientAvx512(const float* delta, size_t n, size_t o, const float* x, size_t i,
                          size_t row_begin, size_t row_end, float* dw,
                          std::vector<float>* transposed, std::vector<float>* staged);
void InputGradientAvx512(const float* delta, size_t n, const float* w, size_t o, size_t i,
                         float* out, std::vector<float>* transposed, std::vector<float>* staged);

void ForwardAvx2(const float* x, size_t n, const float* w, size_t o, size_t i, float* out,
                 std::vector<float>* transposed, std::vector<float>* staged);
void WeightGradientAvx2(const float* delta, size_t n, size_t o, const float* x, size_t i,
                        size_t row_begin, size_t row_end, float* dw, std::vector<float>* transposed,
                        std::vector<float>* staged);
void InputGradientAvx2(const float* delta, size_t n, const float* w, size_t o, size_t i, float* out,
                       std::vector<float>* transposed, std::vector<float>* staged);

// The plain loops: each element one std::fma chain from zero, in the
// order the vector paths keep.
void ForwardPortable(const float* x, size_t n, const float* w, size_t o, size_t i, float* out);
void WeightGradientPortable(const float* delta, size_t n, size_t o, const float* x, size_t i,
                            size_t row_begin, size_t row_end, float* dw);
void InputGradientPortable(const float* delta, size_t n, const float* w, size_t o, size_t i,
                           float* out);

}  // namespace loco::small_batch

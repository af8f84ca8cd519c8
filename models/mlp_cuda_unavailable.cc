// CudaMlp in a build without the CUDA toolkit: Create says so; nothing else
// can be reached, since no CudaMlp can be made.
#include "models/mlp_cuda.h"

namespace loco {

struct CudaMlp::Impl {
  std::vector<size_t> sizes;
};

StatusOr<std::unique_ptr<CudaMlp>> CudaMlp::Create(std::vector<size_t>, int, size_t) {
  return Unimplemented(
      "this build has no CUDA support (configure with the CUDA toolkit present and "
      "-DLOCO_CUDA=AUTO or ON)");
}

CudaMlp::CudaMlp(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaMlp::~CudaMlp() = default;
size_t CudaMlp::num_parameters() const { return 0; }
const std::vector<size_t>& CudaMlp::layer_sizes() const { return impl_->sizes; }

StatusOr<double> CudaMlp::LossAndGradientOnDevice(const float*, std::span<const float>,
                                                  std::span<const uint8_t>, float*,
                                                  const GradientReady&) {
  return Unimplemented("no CUDA support in this build");
}
StatusOr<double> CudaMlp::LossAndGradient(std::span<const float>, std::span<const float>,
                                          std::span<const uint8_t>, std::vector<float>*) {
  return Unimplemented("no CUDA support in this build");
}
StatusOr<double> CudaMlp::LossAndGradientKeptOnDevice(std::span<const float>,
                                                      std::span<const float>,
                                                      std::span<const uint8_t>,
                                                      const GradientReady&) {
  return Unimplemented("no CUDA support in this build");
}
std::span<const float> CudaMlp::device_gradients() const { return {}; }
StatusOr<EvalResult> CudaMlp::Evaluate(std::span<const float>, std::span<const float>,
                                       std::span<const uint8_t>) {
  return Unimplemented("no CUDA support in this build");
}

}  // namespace loco

// TrainingTask for the MLP on Fashion-MNIST (worker/training_task.h), on the
// CPU (Mlp) or on a CUDA device (CudaMlp).
#include <algorithm>
#include <memory>

#include "data/fashion_mnist.h"
#include "models/mlp.h"
#include "models/mlp_cuda.h"
#include "worker/training_task.h"

namespace loco {
namespace {

class MlpTask final : public TrainingTask {
 public:
  // `gpu` null: the CPU model computes.
  MlpTask(std::shared_ptr<const FashionMnist> data, Mlp mlp, MlpDevice device,
          std::unique_ptr<CudaMlp> gpu)
      : data_(std::move(data)), mlp_(std::move(mlp)), device_(device), gpu_(std::move(gpu)) {}

  size_t num_parameters() const override { return mlp_.num_parameters(); }
  std::vector<float> InitialParameters(uint64_t seed) const override {
    return mlp_.InitialParameters(seed);
  }
  size_t num_train_samples() const override { return data_->train().size(); }

  StatusOr<double> LossAndGradient(std::span<const float> params, std::span<const size_t> indices,
                                   std::vector<float>* grads,
                                   const GradientReady& ready) override {
    LOCO_RETURN_IF_ERROR(GatherBatch(indices));
    if (gpu_) return gpu_->LossAndGradient(params, batch_, labels_, grads);
    return mlp_.LossAndGradient(params, batch_, labels_, grads, ready);
  }

  StatusOr<double> LossAndDeviceGradient(std::span<const float> params,
                                         std::span<const size_t> indices,
                                         const GradientReady& ready) override {
    if (!gpu_) return TrainingTask::LossAndDeviceGradient(params, indices, ready);
    LOCO_RETURN_IF_ERROR(GatherBatch(indices));
    return gpu_->LossAndGradientKeptOnDevice(params, batch_, labels_, ready);
  }

  std::span<const float> device_gradient() const override {
    return gpu_ ? gpu_->device_gradients() : std::span<const float>();
  }

  StatusOr<EvalResult> Evaluate(std::span<const float> params) override {
    if (gpu_) return gpu_->Evaluate(params, data_->test().images, data_->test().labels);
    return mlp_.Evaluate(params, data_->test().images, data_->test().labels);
  }

  StatusOr<std::unique_ptr<TrainingTask>> NewReplica(size_t local_rank) const override {
    std::unique_ptr<CudaMlp> gpu;
    if (device_.cuda) {
      auto made = CudaMlp::Create(mlp_.layer_sizes(), static_cast<int>(local_rank),
                                  device_.max_batch);
      if (!made.ok()) return made.status().Annotate("local rank " + std::to_string(local_rank));
      gpu = std::move(made).value();
    }
    return std::unique_ptr<TrainingTask>(
        std::make_unique<MlpTask>(data_, mlp_, device_, std::move(gpu)));
  }

 private:
  // The samples `indices` into batch_ and labels_.
  Status GatherBatch(std::span<const size_t> indices) {
    const ImageSet& train = data_->train();
    const size_t px = train.pixels();
    batch_.resize(indices.size() * px);
    labels_.resize(indices.size());
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] >= train.size()) {
        return InvalidArgument("MlpTask: sample " + std::to_string(indices[i]) +
                               " is not in [0, " + std::to_string(train.size()) + ")");
      }
      std::copy_n(train.images.data() + indices[i] * px, px, batch_.data() + i * px);
      labels_[i] = train.labels[indices[i]];
    }
    return Status::Ok();
  }

  std::shared_ptr<const FashionMnist> data_;
  Mlp mlp_;
  MlpDevice device_;
  std::unique_ptr<CudaMlp> gpu_;
  std::vector<float> batch_;
  std::vector<uint8_t> labels_;
};

}  // namespace

StatusOr<std::unique_ptr<TrainingTask>> MakeMlpTask(const std::string& data_dir,
                                                    const std::vector<size_t>& hidden,
                                                    MlpDevice device) {
  auto data = FashionMnist::Load(data_dir);
  if (!data.ok()) return data.status();
  std::vector<size_t> sizes{data->train().pixels()};
  sizes.insert(sizes.end(), hidden.begin(), hidden.end());
  sizes.push_back(FashionMnist::kClasses);
  auto mlp = Mlp::Create(sizes);
  if (!mlp.ok()) return mlp.status();
  mlp->set_small_batch_gemm(device.small_batch_gemm);
  mlp->set_ready_granularity(device.ready_granularity);
  std::unique_ptr<CudaMlp> gpu;
  if (device.cuda) {
    auto made = CudaMlp::Create(sizes, 0, device.max_batch);
    if (!made.ok()) return made.status().Annotate("--device cuda");
    gpu = std::move(made).value();
  }
  return std::unique_ptr<TrainingTask>(
      new MlpTask(std::make_shared<const FashionMnist>(std::move(data).value()),
                  std::move(mlp).value(), device, std::move(gpu)));
}

}  // namespace loco

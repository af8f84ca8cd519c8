// TrainingTask for the MLP on Fashion-MNIST (worker/training_task.h).
#include <algorithm>
#include <memory>

#include "worker/fashion_mnist.h"
#include "worker/training_task.h"

namespace loco {
namespace {

class MlpTask final : public TrainingTask {
 public:
  MlpTask(std::shared_ptr<const FashionMnist> data, Mlp mlp)
      : data_(std::move(data)), mlp_(std::move(mlp)) {}

  size_t num_parameters() const override { return mlp_.num_parameters(); }
  std::vector<float> InitialParameters(uint64_t seed) const override {
    return mlp_.InitialParameters(seed);
  }
  size_t num_train_samples() const override { return data_->train().size(); }

  StatusOr<double> LossAndGradient(std::span<const float> params, std::span<const size_t> indices,
                                   std::vector<float>* grads) override {
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
    return mlp_.LossAndGradient(params, batch_, labels_, grads);
  }

  StatusOr<EvalResult> Evaluate(std::span<const float> params) override {
    return mlp_.Evaluate(params, data_->test().images, data_->test().labels);
  }

  std::unique_ptr<TrainingTask> NewReplica() const override {
    return std::make_unique<MlpTask>(data_, mlp_);
  }

 private:
  std::shared_ptr<const FashionMnist> data_;
  Mlp mlp_;
  std::vector<float> batch_;
  std::vector<uint8_t> labels_;
};

}  // namespace

StatusOr<std::unique_ptr<TrainingTask>> MakeMlpTask(const std::string& data_dir,
                                                    const std::vector<size_t>& hidden) {
  auto data = FashionMnist::Load(data_dir);
  if (!data.ok()) return data.status();
  std::vector<size_t> sizes{data->train().pixels()};
  sizes.insert(sizes.end(), hidden.begin(), hidden.end());
  sizes.push_back(FashionMnist::kClasses);
  auto mlp = Mlp::Create(sizes);
  if (!mlp.ok()) return mlp.status();
  return std::unique_ptr<TrainingTask>(
      new MlpTask(std::make_shared<const FashionMnist>(std::move(data).value()),
                  std::move(mlp).value()));
}

}  // namespace loco

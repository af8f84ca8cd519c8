// TrainingTask for the character-level transformer (worker/training_task.h).
#include <algorithm>
#include <memory>

#include "data/text_corpus.h"
#include "models/char_transformer.h"
#include "worker/training_task.h"

namespace loco {
namespace {

class CharLmTask final : public TrainingTask {
 public:
  CharLmTask(std::shared_ptr<const TextCorpus> corpus, CharTransformer model, size_t eval_windows)
      : corpus_(std::move(corpus)), model_(std::move(model)), eval_windows_(eval_windows) {
    const size_t ctx = model_.config().context;
    const size_t total = TextCorpus::NumWindows(corpus_->validation(), ctx);
    const size_t count = std::min(eval_windows, total);
    for (size_t i = 0; i < count; ++i) {
      TextCorpus::AppendWindow(corpus_->validation(), ctx, i * total / count, &eval_);
    }
  }

  size_t num_parameters() const override { return model_.num_parameters(); }
  std::vector<float> InitialParameters(uint64_t seed) const override {
    return model_.InitialParameters(seed);
  }
  size_t num_train_samples() const override {
    return TextCorpus::NumWindows(corpus_->train(), model_.config().context);
  }

  // The transformer reports no progress: its gradient is final on return.
  StatusOr<double> LossAndGradient(std::span<const float> params, std::span<const size_t> indices,
                                   std::vector<float>* grads, const GradientReady&) override {
    const size_t n = num_train_samples();
    batch_.clear();
    for (size_t k : indices) {
      if (k >= n) {
        return InvalidArgument("CharLmTask: window " + std::to_string(k) + " is not in [0, " +
                               std::to_string(n) + ")");
      }
      TextCorpus::AppendWindow(corpus_->train(), model_.config().context, k, &batch_);
    }
    return model_.LossAndGradient(params, batch_, grads);
  }

  StatusOr<EvalResult> Evaluate(std::span<const float> params) override {
    return model_.Evaluate(params, eval_);
  }

  StatusOr<std::unique_ptr<TrainingTask>> NewReplica(size_t) const override {
    return std::unique_ptr<TrainingTask>(
        std::make_unique<CharLmTask>(corpus_, model_, eval_windows_));
  }

 private:
  std::shared_ptr<const TextCorpus> corpus_;
  CharTransformer model_;
  size_t eval_windows_;
  std::vector<uint8_t> batch_, eval_;
};

}  // namespace

StatusOr<std::unique_ptr<TrainingTask>> MakeCharLmTask(const std::string& corpus_dir,
                                                       const CharTransformerConfig& config,
                                                       size_t eval_windows) {
  if (eval_windows == 0) {
    return InvalidArgument("CharLmTask: eval_windows must be >= 1");
  }
  auto corpus = TextCorpus::Load(corpus_dir);
  if (!corpus.ok()) return corpus.status();
  auto model = CharTransformer::Create(config);
  if (!model.ok()) return model.status();
  if (TextCorpus::NumWindows(corpus->train(), config.context) == 0 ||
      TextCorpus::NumWindows(corpus->validation(), config.context) == 0) {
    return InvalidArgument("CharLmTask: the corpus in '" + corpus_dir +
                           "' is shorter than one window of context + 1 = " +
                           std::to_string(config.context + 1) + " bytes");
  }
  return std::unique_ptr<TrainingTask>(new CharLmTask(
      std::make_shared<const TextCorpus>(std::move(corpus).value()), std::move(model).value(),
      eval_windows));
}

}  // namespace loco

#include "server/shard_step.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <utility>
#include <vector>

#include "kernels/decode_accumulate.h"

namespace loco {

Status RunShardStep(ShardStore& store, const StepAggregator& payloads, ReturnPath& return_path,
                    const AdamWParams& hyper, size_t threads, const ShardStepHooks& hooks,
                    ShardStepResult* result) {
  return RunShardStep(store, payloads, return_path, HyperGroups::Uniform(store.length(), hyper),
                      threads, hooks, result);
}

Status RunShardStep(ShardStore& store, const StepAggregator& payloads, ReturnPath& return_path,
                    const HyperGroups& hyper, size_t threads, const ShardStepHooks& hooks,
                    ShardStepResult* result) {
  const size_t length = store.length();
  return_path.OnApplying();
  // Called from the apply threads at once: the decode time is summed
  // atomically.
  std::atomic<int64_t> decode_ns{0};
  const std::vector<PayloadView> views = payloads.views();
  auto pieces = [&](size_t begin, size_t count, float* scratch) {
    const auto d0 = std::chrono::steady_clock::now();
    // Validated by the caller; the pieces are aligned and in range
    // (ShardStore's contract), so this cannot fail.
    (void)cpu::DecodeAccumulateRange(views.data(), views.size(), length, begin, count, scratch);
    decode_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::steady_clock::now() - d0).count();
    return static_cast<const float*>(scratch);
  };
  const ReturnPath::AnswerBuffers answer = return_path.BeginAnswer(length, store.version() + 1);
  if (hooks.answer_begun) hooks.answer_begun(answer);
  std::mutex answer_mu;  // guards result->answer
  result->answer = Status::Ok();
  const float* new_params = store.params().data();
  auto applied = [&](size_t begin, size_t count, float* /*scratch*/) {
    Status s = return_path.EncodeAnswerRange(new_params, begin, count);
    if (s.ok()) {
      if (hooks.piece_encoded) hooks.piece_encoded(begin, count);
      return;
    }
    std::lock_guard<std::mutex> lock(answer_mu);
    if (result->answer.ok()) result->answer = std::move(s);
  };
  const Status applied_ok =
      store.Apply(pieces, hyper, &result->stats, threads,
                  answer.data ? ShardStore::PieceApplied(applied) : nullptr);
  result->decode_ns = decode_ns.load();
  if (!applied_ok.ok()) {
    return_path.CancelAnswer();
    return applied_ok;
  }
  return Status::Ok();
}

}  // namespace loco

// RunShardStep: the computation of one shard's step once its pushes are in:
// the mean of the held payloads decoded a piece at a time straight into
// AdamW (the shard never holds the whole mean: 4 bytes per element saved,
// bit for bit the same step), and the answer to the pulls (the return delta,
// or the bf16 copy) encoded a piece at a time as AdamW makes each piece of
// the master final. The bytes (and the delta's replica) are the same as one
// ReturnPath::OnApplied after the step.
//
// ShardMachine runs it under its lock; loco-bench-cpu-step runs it alone.
// Not thread-safe with respect to its arguments: the caller serialises
// access to the store, the payloads and the return path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "common/status.h"
#include "kernels/adamw.h"
#include "server/hyper_groups.h"
#include "server/return_path.h"
#include "server/shard_store.h"
#include "server/step_aggregator.h"

namespace loco {

struct ShardStepHooks {
  // Called once, after the answer's buffers were made (null data: no
  // answer in parts this version, e.g. a full sync) and before AdamW
  // starts.
  std::function<void(const ReturnPath::AnswerBuffers&)> answer_begun;
  // Called on an apply thread once [begin, begin + count) of the answer is
  // encoded; calls for distinct pieces may run concurrently.
  std::function<void(size_t begin, size_t count)> piece_encoded;
};

struct ShardStepResult {
  ApplyStats stats;
  int64_t decode_ns = 0;  // decoding time summed over the apply threads
  // The first failure to encode a piece of the answer (OK when none, or no
  // answer in parts); pass it to ReturnPath::FinishAnswer.
  Status answer = Status::Ok();
};

// Precondition: payloads.Validate(store.length()) succeeded. Calls
// return_path.OnApplying and BeginAnswer, then store.Apply with up to
// `threads` threads. On an error from Apply the answer is cancelled
// (ReturnPath::CancelAnswer) and the error returned; otherwise the caller
// ends the version with ReturnPath::FinishAnswer(store.params(),
// store.version(), result->answer). `hyper`: the step's hyper-parameters
// over the shard (ShardStore::Apply).
[[nodiscard]] Status RunShardStep(ShardStore& store, const StepAggregator& payloads,
                                  ReturnPath& return_path, const HyperGroups& hyper,
                                  size_t threads, const ShardStepHooks& hooks,
                                  ShardStepResult* result);
// The same with one set of hyper-parameters for the whole shard.
[[nodiscard]] Status RunShardStep(ShardStore& store, const StepAggregator& payloads,
                                  ReturnPath& return_path, const AdamWParams& hyper,
                                  size_t threads, const ShardStepHooks& hooks,
                                  ShardStepResult* result);

}  // namespace loco

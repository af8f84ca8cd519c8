// AnswerParts: the answer of one version (its delta, or its bf16 copy)
// while the step that makes it is still running, handed from the step to
// the pulls that wait for it.
//
// The step (ShardMachine, under the shard's lock) calls Begin with the
// answer's header and the buffers its data (and scales) are being written
// into, then Publish for each range of elements as soon as that range's
// bytes are final, from any apply thread and in any order, and Finish at
// the end; or Abandon when this version will have no answer in parts (a
// full sync, a failed step, a fast-forward, a stop). A pull waiting for the
// version takes the parts as they are published and sends them, without
// the shard's lock, while the step goes on.
//
// Ranges are in elements, aligned to the answer's blocks (so whole bytes of
// codes and whole scales). The buffers are shared: a part's bytes are never
// written again once published, and a pull's slices keep the buffers alive.
//
// Thread-safe. Lock order: the shard's lock may be held when calling the
// producer's methods; the consumer's Wait is called without it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "proto/loco.pb.h"

namespace loco {

class AnswerParts {
 public:
  struct Part {
    uint64_t begin = 0;  // elements
    uint64_t count = 0;
  };
  enum class State { kPending, kStreaming, kAbandoned };

  explicit AnswerParts(uint64_t version) : version_(version) {}
  // The version this answer is for (the shard's version + 1 when made).
  uint64_t version() const { return version_; }

  // Producer. `header` is the answer without data and scales; `data` and
  // `scales` are sized for the whole answer. Waiting pulls are woken once
  // at least `wake_every` more elements are published (and at the end),
  // not for every part: each wake-up is a write on the wire and a context
  // switch on a machine whose cores the step is using. Call once, before
  // Publish.
  void Begin(const v1::PullResponse& header, std::shared_ptr<const std::string> data,
             std::shared_ptr<const std::string> scales, uint64_t wake_every);
  // [begin, begin + count) is final. Thread-safe; each element once.
  void Publish(uint64_t begin, uint64_t count);
  // No answer in parts for this version after all: waiting pulls answer
  // another way.
  // Also after Begin (a step that fails midway): parts already published
  // are then void.
  void Abandon();

  // Consumer: waits until the state is not kPending and a part beyond the
  // first `*taken` is published (appending them to *fresh and advancing
  // *taken), the answer is complete, it is abandoned, or `deadline` passes.
  // Returns the state.
  State Wait(std::chrono::steady_clock::time_point deadline, size_t* taken,
             std::vector<Part>* fresh);
  // Valid once Wait returned kStreaming.
  const v1::PullResponse& header() const { return header_; }
  const std::shared_ptr<const std::string>& data() const { return data_; }
  const std::shared_ptr<const std::string>& scales() const { return scales_; }
  // Elements published so far (complete when it equals header().params().length()).
  uint64_t published() const;

 private:
  const uint64_t version_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::kPending;
  v1::PullResponse header_;
  std::shared_ptr<const std::string> data_, scales_;
  std::vector<Part> parts_;
  uint64_t published_ = 0;
  uint64_t woken_at_ = 0;    // published_ when waiters were last woken
  uint64_t wake_every_ = 0;
  size_t visible_ = 0;       // parts_ waiters may take (up to the last wake-up)
};

}  // namespace loco

// GradientReadiness: which parts of a gradient a backward pass has made
// final, reported part by part on one thread (the training thread's
// gradient hooks) and turned into GradientReady calls on another (the
// thread that runs an overlapped Worker::Step: python/src/background_step.h).
//
// The gradient is laid out as consecutive parts (a model's parameters in
// layout order): part i covers [begin(i), begin(i + 1)), the last part ends
// at the gradient's size; a part may be empty (a parameter without
// elements). A backward pass finishes the last layers first,
// so the final parts grow as a suffix of the layout; Drive reports the
// beginning of the longest suffix of final parts each time it grows. A part
// never marked (a parameter that backward did not reach) holds the suffix
// above it until Finish, after which the whole gradient counts as final.
//
// Thread safety: every method may be called from any thread; one mutex
// guards the state, held only for a few comparisons. No method needs the
// GIL. Drive runs on one thread at a time.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/gradient_ready.h"
#include "common/status.h"

namespace loco::python {

class GradientReadiness {
 public:
  // InvalidArgument unless `part_begins` is non-empty, starts at 0, never
  // falls and stays within `num_elements`.
  [[nodiscard]] static StatusOr<std::unique_ptr<GradientReadiness>> Create(
      std::vector<size_t> part_begins, size_t num_elements);

  size_t num_parts() const { return begins_.size(); }
  // `part` < num_parts() (the caller checks).
  bool IsReady(size_t part) const;
  // Part `part` is final. Returns false, changing nothing, when it was
  // marked already.
  bool MarkReady(size_t part);
  // The whole gradient is final, parts never marked included: Drive
  // returns OK. Ignored after Abort.
  void Finish();
  // Drive returns Aborted(reason) instead (the first reason given wins);
  // ignored after Finish.
  void Abort(const std::string& reason);

  // The computation of an overlapped Worker::Step: calls ready(begin of the
  // final suffix) each time that suffix grows, and returns once Finish
  // (OK) or Abort (Aborted) has been called.
  [[nodiscard]] Status Drive(const GradientReady& ready);

 private:
  GradientReadiness(std::vector<size_t> part_begins, size_t num_elements);
  // The first element of the final suffix; mu_ held.
  size_t SuffixBeginLocked() const;

  const std::vector<size_t> begins_;
  const size_t num_elements_;
  mutable std::mutex mu_;
  std::condition_variable changed_;  // the suffix grew, or Finish / Abort
  std::vector<bool> ready_;          // per part; under mu_
  size_t suffix_;                    // parts [suffix_, n) are final; under mu_
  bool finished_ = false;            // under mu_
  std::optional<std::string> abort_reason_;  // under mu_
};

}  // namespace loco::python

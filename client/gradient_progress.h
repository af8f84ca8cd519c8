// GradientProgress: how far a gradient computation running on one thread has
// got, for the threads that push its parts meanwhile (Worker::Step). The
// computation reports that suffixes of the gradient are final (Ready, see
// common/gradient_ready.h) and then that it returned (Done); the pushing
// threads wait for the parts they need.
//
// Thread-safe: one computing thread calls Ready and Done; any number of
// threads wait.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>

namespace loco {

class GradientProgress {
 public:
  // `size`: the gradient's number of elements; nothing is final yet.
  explicit GradientProgress(size_t size) : final_from_(size) {}

  // Elements [from, size) are final. A `from` above an earlier one is
  // ignored (the final part never shrinks).
  void Ready(size_t from);
  // The computation returned: with `ok`, every element is final; without,
  // the gradient will not be finished and every wait returns nullopt.
  void Done(bool ok);

  // Blocks until the final part begins below `from` or the computation
  // returned. Returns where the final part begins (0 once it returned
  // with ok), or nullopt when the computation failed.
  std::optional<size_t> WaitFinalBelow(size_t from);
  // Blocks until the computation returned, ok or not.
  void WaitDone();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t final_from_;   // guarded by mu_
  bool done_ = false;   // guarded by mu_
  bool failed_ = false; // guarded by mu_
};

}  // namespace loco

// StepRound: one synchronous training step of several loco::Worker objects,
// each Worker::Step call on its own std::thread, as separate processes would
// run it.
//
// Every Step is bounded by its worker's step_timeout_ms (plus one RPC
// deadline), so Finish() is bounded too. A StepRound is used from one thread
// (the test's); the members' workers, params and grads must outlive it and
// must not be touched by anyone else until Finish() returned.
#pragma once

#include <thread>
#include <vector>

#include "common/status.h"
#include "client/worker.h"

namespace loco::test {

class StepRound {
 public:
  struct Member {
    Worker* worker = nullptr;
    std::vector<float>* params = nullptr;
    const std::vector<float>* grads = nullptr;
  };

  StepRound() = default;
  // Joins the threads if Finish() was not called.
  ~StepRound();
  StepRound(const StepRound&) = delete;
  StepRound& operator=(const StepRound&) = delete;

  // Starts one thread per member calling worker->Step(*grads, params).
  void Start(std::vector<Member> members);
  // Waits for every thread; returns each member's result, in Start's order.
  std::vector<StatusOr<StepResult>> Finish();

 private:
  std::vector<Member> members_;
  std::vector<StatusOr<StepResult>> results_;
  std::vector<std::thread> threads_;
};

}  // namespace loco::test

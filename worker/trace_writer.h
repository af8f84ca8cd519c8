// TraceWriter: appends a worker's per-step loss and its evaluation results to
// CSV files, for the convergence benchmark (bench/convergence/): DIR/NAME.csv
// with "step,loss" rows and DIR/NAME-eval.csv with
// "step,epoch,accuracy,loss" rows. A header is written when a file is new.
// Appending lets a rejoined worker continue the same trace.
//
// Not thread-safe; one per training loop.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "common/status.h"

namespace loco {

class TraceWriter {
 public:
  // Creates `dir` when missing; UNAVAILABLE-style errors name the path.
  static StatusOr<TraceWriter> Open(const std::string& dir, const std::string& name);

  Status Step(uint64_t step, double loss);
  Status Eval(uint64_t step, uint64_t epoch, double accuracy, double loss);

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  using File = std::unique_ptr<std::FILE, Closer>;
  TraceWriter(File steps, File evals) : steps_(std::move(steps)), evals_(std::move(evals)) {}

  File steps_, evals_;
};

}  // namespace loco

// StepAggregator: the payloads a shard holds for its open step, at most one
// per worker, their mean once the step is complete, the step's
// hyper-parameters (fixed by its first accepted push), and the workers that
// withdrew from it (PushRequest.withdraw).
//
// Not thread-safe: the owner (ShardMachine) serialises access.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/hyper_groups.h"
#include "server/owned_payload.h"

namespace loco {

class StepAggregator {
 public:
  // Drops every held payload, the hyper-parameters and the withdrawals, and
  // opens `step`.
  // Returns the dropped payloads' data buffers, for the next step's pushes
  // (server/payload_buffers.h).
  std::vector<std::string> Open(uint64_t step);
  uint64_t step() const { return step_; }

  bool Has(uint64_t worker_id) const { return payloads_.count(worker_id) != 0; }
  // Returns false (and drops `payload`) when the worker already pushed this
  // step: the first accepted push wins, a retry is acknowledged only. A
  // push takes back the worker's withdrawal.
  bool Add(uint64_t worker_id, OwnedPayload payload);

  // The worker will not push this step: CompleteFor stops waiting for it.
  // Precondition: !Has(worker_id). Returns false when it had withdrawn already.
  bool Withdraw(uint64_t worker_id);
  bool Withdrew(uint64_t worker_id) const { return withdrawn_.count(worker_id) != 0; }
  size_t withdrawn() const { return withdrawn_.size(); }
  size_t size() const { return payloads_.size(); }
  std::vector<uint64_t> workers() const;

  // The step's hyper-parameters: null until FixHyper. The owner fixes them
  // with the step's first accepted push and refuses later pushes whose
  // hyper-parameters differ.
  const HyperGroups* hyper() const { return hyper_ ? &*hyper_ : nullptr; }
  // Sets them unless already fixed (then a no-op).
  void FixHyper(HyperGroups hyper);

  // True when at least one payload is held and every id in `live` pushed or
  // withdrew, except at most `slack` of them (stragglers not waited for).
  // Payloads of workers no longer live still count towards the mean.
  bool CompleteFor(const std::vector<uint64_t>& live, size_t slack = 0) const;

  // out[length] = (1/n) Σ decode(payload_i) over the n held payloads
  // (cpu::DecodeAccumulate), reusing out's storage. FailedPrecondition when
  // nothing is held; on error the values in *out are unspecified.
  Status Mean(size_t length, std::vector<float>* out) const;

  // The mean piece by piece, for a caller that never holds it whole:
  // Validate checks every held payload against `length` (FailedPrecondition
  // when nothing is held); after it succeeded, cpu::DecodeAccumulateRange
  // over views() gives any piece of Mean's result, bit for bit. The views
  // are valid while the payloads are held (until Open or Add).
  Status Validate(size_t length) const;
  std::vector<PayloadView> views() const;

 private:
  uint64_t step_ = 0;
  std::map<uint64_t, OwnedPayload> payloads_;
  std::optional<HyperGroups> hyper_;
  std::set<uint64_t> withdrawn_;
};

}  // namespace loco

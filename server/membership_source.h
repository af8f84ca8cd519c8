// MembershipSource: what a shard asks the coordinator: the cluster view
// (members and the shard map) and a step's participants. ShardService
// answers from its CoordinatorClient; tests answer from plain data, so that
// the shard's state machine (ShardMachine) runs without a server.
//
// Contract for implementations: thread-safe (the shard calls from any
// serving thread, never while holding its own lock), and no call waits
// without a deadline.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "proto/loco.pb.h"

namespace loco {

class MembershipSource {
 public:
  virtual ~MembershipSource() = default;

  virtual StatusOr<v1::ClusterView> GetClusterView() = 0;
  // The participants the coordinator froze for `step` and those of them
  // still live; `pushes_received` is how many pushes this shard holds for
  // it (see loco.v1.Coordinator/GetStepParticipants).
  virtual StatusOr<v1::StepParticipantsResponse> GetStepParticipants(
      uint64_t step, uint32_t shard_id, uint32_t pushes_received) = 0;
};

}  // namespace loco

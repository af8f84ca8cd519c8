// ClusterProgress: how far the cluster's training has got, read from outside
// the membership, so that a worker can wait for a chosen global step before
// it joins (loco-worker --join-at-step). A process that joins "when it is
// ready" lands wherever its start-up time puts it; waiting for the step
// first makes the join point a setting instead of a race.
//
// The cluster's step is shard 0's version (ShardStatus): a worker pushes
// step t + 1 only after it pulled version t + 1 from every shard, so the
// shards' versions differ by at most one (a server restarting from an older
// checkpoint aside) and shard 0 stands for all of them. Its
// address comes from the coordinator's shard map once the view is ready.
// Reading it changes nothing on either side.
//
// Thread safety: one thread at a time. `coordinator` and `retry` are
// borrowed and must outlive this object.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "common/status.h"
#include "proto/loco.grpc.pb.h"
#include "client/retry_policy.h"

namespace loco {

class ClusterProgress {
 public:
  using ChannelFactory = std::function<std::shared_ptr<grpc::Channel>(const std::string& address)>;

  ClusterProgress(v1::Coordinator::Stub* coordinator, ChannelFactory make_channel,
                  RetryPolicy* retry, std::chrono::milliseconds rpc_timeout);

  // The cluster's current step; nullopt while the coordinator's view is not
  // ready or shard 0 holds no parameters yet (no step has a meaning then).
  // Errors are the RPCs' (after the retry policy), annotated with the call.
  StatusOr<std::optional<uint64_t>> Read();

  // Reads every `poll` until the cluster's step is >= `step` and returns the
  // step it saw (which may be past `step`: the cluster does not wait).
  // DeadlineExceeded at `deadline`, naming the last step seen. Aborted when
  // `interrupted` (optional, asked after each read) says so.
  StatusOr<uint64_t> WaitFor(uint64_t step, std::chrono::steady_clock::time_point deadline,
                             std::chrono::milliseconds poll,
                             const std::function<bool()>& interrupted = nullptr);

 private:
  v1::Coordinator::Stub* coordinator_;
  ChannelFactory make_channel_;
  RetryPolicy* retry_;
  std::chrono::milliseconds rpc_timeout_;
  std::string shard0_address_;  // where shard0_ points; empty until the view is ready
  std::unique_ptr<v1::ParameterServer::Stub> shard0_;
};

}  // namespace loco

#include "client/cluster_progress.h"

#include <thread>
#include <utility>

#include "rpc/rpc_status.h"

namespace loco {

ClusterProgress::ClusterProgress(v1::Coordinator::Stub* coordinator, ChannelFactory make_channel,
                                 RetryPolicy* retry, std::chrono::milliseconds rpc_timeout)
    : coordinator_(coordinator),
      make_channel_(std::move(make_channel)),
      retry_(retry),
      rpc_timeout_(rpc_timeout) {}

StatusOr<std::optional<uint64_t>> ClusterProgress::Read() {
  auto deadline = [this] { return std::chrono::system_clock::now() + rpc_timeout_; };
  if (!shard0_) {
    v1::GetClusterViewRequest req;
    v1::ClusterView view;
    grpc::Status s = retry_->Run("GetClusterView", [&] {
      grpc::ClientContext ctx;
      ctx.set_deadline(deadline());
      return coordinator_->GetClusterView(&ctx, req, &view);
    });
    if (!s.ok()) return FromGrpcStatus(s).Annotate("GetClusterView");
    if (!view.ready() || view.shard_map().shards_size() == 0) return std::optional<uint64_t>();
    shard0_address_ = view.shard_map().shards(0).address();
    shard0_ = v1::ParameterServer::NewStub(make_channel_(shard0_address_));
  }
  v1::ShardStatusRequest req;
  req.set_shard_id(0);
  v1::ShardStatusResponse resp;
  grpc::Status s = retry_->Run("ShardStatus 0", [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    return shard0_->ShardStatus(&ctx, req, &resp);
  });
  if (!s.ok()) return FromGrpcStatus(s).Annotate("ShardStatus 0 at " + shard0_address_);
  if (!resp.initialized()) return std::optional<uint64_t>();
  return std::optional<uint64_t>(resp.version());
}

StatusOr<uint64_t> ClusterProgress::WaitFor(uint64_t step,
                                            std::chrono::steady_clock::time_point deadline,
                                            std::chrono::milliseconds poll,
                                            const std::function<bool()>& interrupted) {
  std::optional<uint64_t> seen;
  while (true) {
    StatusOr<std::optional<uint64_t>> now = Read();
    if (!now.ok()) return now.status();
    if (now->has_value()) seen = **now;
    if (seen && *seen >= step) return *seen;
    if (interrupted && interrupted()) {
      return Aborted("waiting for the cluster to reach step " + std::to_string(step) +
                     " was interrupted (its interrupt check said so)");
    }
    if (std::chrono::steady_clock::now() + poll > deadline) {
      return DeadlineExceeded(
          "the cluster did not reach step " + std::to_string(step) + " in time (last seen: " +
          (seen ? "step " + std::to_string(*seen) : std::string("no initialised shard 0")) + ")");
    }
    std::this_thread::sleep_for(poll);
  }
}

}  // namespace loco

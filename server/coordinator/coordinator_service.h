// The loco.v1.Coordinator gRPC service over Membership.
//
// Thread-safe: every handler takes one mutex around the Membership call and
// the proto conversion; nothing blocks while holding it. Worker expiry is
// lazy (Membership expires overdue workers on every call), so there is no
// sweep thread and no wait of any kind.
#pragma once

#include <chrono>
#include <mutex>

#include "proto/loco.grpc.pb.h"
#include "server/coordinator/coordinator_metrics.h"
#include "server/coordinator/membership.h"

namespace loco {

struct CoordinatorOptions {
  MembershipOptions membership;
  std::chrono::milliseconds heartbeat_interval{1000};  // told to workers on Join
  CoordinatorMetrics* metrics = nullptr;  // not owned; must outlive the service; null = none
};

class CoordinatorService final : public v1::Coordinator::Service {
 public:
  explicit CoordinatorService(const CoordinatorOptions& options,
                              Membership::Clock clock = nullptr);

  grpc::Status RegisterServer(grpc::ServerContext* ctx, const v1::RegisterServerRequest* req,
                              v1::RegisterServerResponse* resp) override;
  grpc::Status Join(grpc::ServerContext* ctx, const v1::JoinRequest* req,
                    v1::JoinResponse* resp) override;
  grpc::Status Leave(grpc::ServerContext* ctx, const v1::LeaveRequest* req,
                     v1::LeaveResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override;
  grpc::Status GetClusterView(grpc::ServerContext* ctx, const v1::GetClusterViewRequest* req,
                              v1::ClusterView* resp) override;
  grpc::Status GetStepParticipants(grpc::ServerContext* ctx,
                                   const v1::StepParticipantsRequest* req,
                                   v1::StepParticipantsResponse* resp) override;

  // Brings the metrics' gauges up to date (expiring overdue workers first);
  // called before every scrape. No-op without metrics.
  void RefreshMetrics();

 private:
  static void FillView(const MembershipView& view, v1::ClusterView* out);
  // Counts a refused request and converts its status for the gRPC edge.
  grpc::Status Reject(const char* rpc, const Status& status);

  const CoordinatorOptions options_;
  std::mutex mu_;
  Membership membership_;  // guarded by mu_
};

}  // namespace loco

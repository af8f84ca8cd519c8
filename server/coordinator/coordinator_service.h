// The loco.v1.Coordinator gRPC service over Membership.
//
// Access (docs/DESIGN.md §10), checked before any state is touched:
// RegisterServer and GetStepParticipants need the server role, Join, Leave
// and Heartbeat the worker role (security/caller_role.h); Leave and
// Heartbeat need the worker's ticket when roles are separated (and a ticket
// given is always checked: security/worker_ticket.h); Join is rate-limited
// (JoinRateLimit) and capped at max_workers. With separated roles the
// RegisterServer answer carries the ticket key, so that the shards check
// tickets too (server/ticket_check.h). Every refusal is a status
// (PERMISSION_DENIED, RESOURCE_EXHAUSTED) that changes nothing and is
// counted in loco_coordinator_requests_rejected_total{rpc,reason}.
//
// Thread-safe: every handler takes one mutex around the Membership call and
// the proto conversion; nothing blocks while holding it. Worker expiry is
// lazy (Membership expires overdue workers on every call), so there is no
// sweep thread and no wait of any kind.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include "proto/loco.grpc.pb.h"
#include "security/caller_role.h"
#include "security/worker_ticket.h"
#include "server/coordinator/coordinator_metrics.h"
#include "server/coordinator/join_rate_limit.h"
#include "server/coordinator/membership.h"

namespace loco {

struct CoordinatorOptions {
  MembershipOptions membership;
  std::chrono::milliseconds heartbeat_interval{1000};  // told to workers on Join
  CoordinatorMetrics* metrics = nullptr;  // not owned; must outlive the service; null = none
  // Joins admitted per second once a burst of `membership.max_workers` plus
  // one second's worth is spent (--max-joins-per-second), > 0.
  double max_joins_per_second = 100;
  // The worker-ticket key (--ticket-key-file); empty = a random key per
  // process (tickets do not survive a restart).
  std::string ticket_key_file;
};

class CoordinatorService final : public v1::Coordinator::Service {
 public:
  explicit CoordinatorService(const CoordinatorOptions& options,
                              Membership::Clock clock = nullptr);

  grpc::Status RegisterServer(grpc::ServerContext* ctx, const v1::RegisterServerRequest* req,
                              v1::RegisterServerResponse* resp) override;
  // Whether the recovery after a restart is going on (Membership::recovering):
  // the readiness probe is false meanwhile. Thread-safe.
  bool recovering();
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

  // Who may call what: `roles` decides a call's role (null = not checked,
  // every caller holds both); `tickets` signs and checks worker tickets.
  // Call before serving (not thread-safe with handlers); until then roles
  // are not checked and the key is a random one drawn at construction.
  void ConfigureAccess(std::shared_ptr<const RolePolicy> roles, WorkerTicketKey tickets);

  // Brings the metrics' gauges up to date (expiring overdue workers first);
  // called before every scrape. No-op without metrics.
  void RefreshMetrics();

 private:
  void FillView(const MembershipView& view, v1::ClusterView* out);
  // Counts a refused request and converts its status for the gRPC edge.
  grpc::Status Reject(const char* rpc, const Status& status);
  // What `ctx`'s credentials prove (both roles when roles are not checked).
  CallerIdentity Caller(const grpc::ServerContext* ctx) const;
  // OK when the call holds `role`; else the refusal.
  Status CheckRole(const grpc::ServerContext* ctx, CallerRole role, const char* rpc) const;
  // OK when `ticket` may act for `worker_id` (see the file comment).
  Status CheckTicket(uint64_t worker_id, const std::string& ticket, const char* rpc) const;

  const CoordinatorOptions options_;
  std::mutex mu_;
  Membership membership_;  // guarded by mu_
  JoinRateLimit join_rate_;  // guarded by mu_
  std::shared_ptr<const RolePolicy> roles_;  // set before serving; null = not checked
  std::optional<WorkerTicketKey> tickets_;   // set before serving
};

}  // namespace loco

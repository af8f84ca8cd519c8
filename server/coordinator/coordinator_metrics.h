// CoordinatorMetrics: the coordinator's Prometheus metrics.
//
//   loco_coordinator_active_workers               members of the cluster now
//   loco_coordinator_membership_epoch             changes on every join/leave/expiry
//   loco_coordinator_membership_changes_total{change="join"|"leave"|"expire"}
//   loco_coordinator_registered_servers           shards whose server registered
//   loco_coordinator_shards                       shards of the cluster
//   loco_coordinator_model_elements               model size (0 until the first join)
//   loco_coordinator_requests_rejected_total{rpc,reason}   reason = gRPC code
//
// Not thread-safe beyond prometheus-cpp's own atomics: the owner
// (CoordinatorService) calls it under its lock.
#pragma once

#include <cstdint>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "common/status.h"
#include "server/coordinator/membership.h"

namespace loco {

class CoordinatorMetrics {
 public:
  // Registers the families in `registry`, which must outlive this object.
  explicit CoordinatorMetrics(prometheus::Registry& registry);

  void OnJoin() { joins_.Increment(); }
  void OnLeave() { leaves_.Increment(); }
  void OnRejected(const std::string& rpc, const Status& status);
  // Sets the gauges from `view`. Expiries are derived: the epoch grows by one
  // per join, leave and expiry, so expiries = epoch - joins - leaves.
  void Observe(const MembershipView& view);

 private:
  prometheus::Family<prometheus::Counter>& changes_;
  prometheus::Family<prometheus::Counter>& rejected_;
  prometheus::Counter& joins_;
  prometheus::Counter& leaves_;
  prometheus::Counter& expiries_;
  prometheus::Gauge& active_workers_;
  prometheus::Gauge& epoch_;
  prometheus::Gauge& registered_servers_;
  prometheus::Gauge& shards_;
  prometheus::Gauge& model_elements_;
};

}  // namespace loco

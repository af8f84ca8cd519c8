#include "server/coordinator/coordinator_metrics.h"

#include "metrics/metric_conventions.h"

namespace loco {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

CoordinatorMetrics::CoordinatorMetrics(prometheus::Registry& r)
    : changes_(BuildCounter()
                   .Name("loco_coordinator_membership_changes_total")
                   .Help("Membership changes: workers joined, left or expired (missed heartbeats)")
                   .Register(r)),
      rejected_(BuildCounter()
                    .Name("loco_coordinator_requests_rejected_total")
                    .Help("Requests answered with an error, by RPC and gRPC status code")
                    .Register(r)),
      joins_(changes_.Add({{"change", "join"}})),
      leaves_(changes_.Add({{"change", "leave"}})),
      expiries_(changes_.Add({{"change", "expire"}})),
      active_workers_(BuildGauge()
                          .Name("loco_coordinator_active_workers")
                          .Help("Workers that are members of the cluster")
                          .Register(r)
                          .Add({})),
      epoch_(BuildGauge()
                 .Name("loco_coordinator_membership_epoch")
                 .Help("Membership epoch; changes on every join, leave and expiry")
                 .Register(r)
                 .Add({})),
      registered_servers_(BuildGauge()
                              .Name("loco_coordinator_registered_servers")
                              .Help("Shards whose parameter server registered")
                              .Register(r)
                              .Add({})),
      shards_(BuildGauge()
                  .Name("loco_coordinator_shards")
                  .Help("Shards of the cluster")
                  .Register(r)
                  .Add({})),
      model_elements_(BuildGauge()
                          .Name("loco_coordinator_model_elements")
                          .Help("Parameters of the model (0 until the first worker joins)")
                          .Register(r)
                          .Add({})) {}

void CoordinatorMetrics::OnRejected(const std::string& rpc, const Status& status) {
  if (status.ok()) return;
  rejected_.Add({{"rpc", rpc}, {"reason", ReasonLabel(status.code())}}).Increment();
}

void CoordinatorMetrics::Observe(const MembershipView& view) {
  active_workers_.Set(static_cast<double>(view.worker_ids.size()));
  epoch_.Set(static_cast<double>(view.epoch));
  size_t registered = 0;
  for (const auto& s : view.shards) registered += s.address.empty() ? 0 : 1;
  registered_servers_.Set(static_cast<double>(registered));
  shards_.Set(static_cast<double>(view.shards.size()));
  model_elements_.Set(static_cast<double>(view.total_elements));
  const double expired = static_cast<double>(view.epoch) - joins_.Value() - leaves_.Value();
  if (expired > expiries_.Value()) expiries_.Increment(expired - expiries_.Value());
}

}  // namespace loco

// ShardMachine's range: learnt from the coordinator's cluster view, or
// restored from a checkpoint and confirmed against that view before the
// shard serves; what the shard reports when it registers.
#include <algorithm>
#include <string>

#include "common/log.h"
#include "server/shard_machine.h"

namespace loco {

Status ShardMachine::EnsureRange() {
  bool restored_unconfirmed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!layout_refused_.ok()) return layout_refused_;
    if (range_ && range_confirmed_) return Status::Ok();
    restored_unconfirmed = range_.has_value();
  }
  if (restored_unconfirmed) return ConfirmRestoredRange();
  auto view = membership_->GetClusterView();
  if (!view.ok()) {
    return Unavailable("this shard's range is not known yet: " + view.status().ToString() +
                       "; retry");
  }
  const auto& map = view->shard_map();
  if (map.total_elements() == 0) {
    return Unavailable(
        "this shard's range is not known yet: no worker has joined the "
        "coordinator (the first Join fixes the model size); retry");
  }
  for (const auto& s : map.shards()) {
    if (s.shard_id() != options_.shard_id) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (!range_) {
      range_ = ShardRange{s.offset(), s.length()};
      total_elements_ = map.total_elements();
      range_confirmed_ = true;
      LOG_INFO("shard " << options_.shard_id << " owns [" << s.offset() << ", "
                        << s.offset() + s.length() << ") of " << map.total_elements());
    }
    return Status::Ok();
  }
  return FailedPrecondition("the coordinator's shard map has no shard " +
                            std::to_string(options_.shard_id) + " (it has " +
                            std::to_string(map.shards_size()) +
                            "); check --shard-id and the coordinator's --num-servers");
}

Status ShardMachine::ConfirmRestoredRange() {
  ShardRange restored;
  uint64_t restored_total = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!range_ || range_confirmed_ || !layout_refused_.ok()) return layout_refused_;
    restored = *range_;
    restored_total = total_elements_;
  }
  const std::string shard = "shard " + std::to_string(options_.shard_id);
  auto view = membership_->GetClusterView();
  if (!view.ok()) {
    return Unavailable(shard +
                       " was restored from a checkpoint and checks its range against the "
                       "coordinator's layout before it serves: " +
                       view.status().ToString() + "; retry");
  }
  const auto& map = view->shard_map();
  if (map.total_elements() == 0) {
    // The coordinator restarted too and knows no model size yet. A format-1
    // checkpoint holds none either: nothing can tell, served unchecked and
    // asked again next time. Otherwise this server's registration reports
    // the size, and the coordinator's layout follows from it.
    if (restored_total == 0) return Status::Ok();
    return Unavailable(shard + " was restored from a checkpoint of a model of " +
                       std::to_string(restored_total) +
                       " elements and waits for the coordinator to learn the model's layout "
                       "(from the servers' registrations); retry");
  }
  const auto mine = std::find_if(map.shards().begin(), map.shards().end(),
                                 [&](const auto& s) { return s.shard_id() == options_.shard_id; });
  const bool same_model = restored_total == 0 || restored_total == map.total_elements();
  std::lock_guard<std::mutex> lock(mu_);
  if (same_model && mine != map.shards().end() && mine->offset() == restored.offset &&
      mine->length() == restored.length) {
    total_elements_ = map.total_elements();
    range_confirmed_ = true;
    LOG_INFO(shard << ": the restored range [" << restored.offset << ", "
                   << restored.offset + restored.length << ") agrees with the coordinator's "
                   << "layout of " << total_elements_ << " elements");
    return Status::Ok();
  }
  const std::string layout = mine == map.shards().end()
                                 ? "has no " + shard
                                 : "gives " + shard + " [" + std::to_string(mine->offset()) + ", " +
                                       std::to_string(mine->offset() + mine->length()) + ")";
  const std::string model =
      restored_total == 0 ? "" : " of a model of " + std::to_string(restored_total) + " elements";
  layout_refused_ = FailedPrecondition(
      shard + " was restored from a checkpoint of [" + std::to_string(restored.offset) + ", " +
      std::to_string(restored.offset + restored.length) + ")" + model +
      ", but the coordinator's layout of " + std::to_string(map.total_elements()) + " elements " +
      layout +
      (same_model ? ": restart with the --num-servers and --shard-align the checkpoint "
                    "was written under, or start this server without the checkpoint"
                  : ": the checkpoint is another model's; start this server with this run's "
                    "checkpoints, or without any"));
  LOG_ERROR(layout_refused_.message());
  return layout_refused_;
}

bool ShardMachine::range_unconfirmed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return range_ && !range_confirmed_ && layout_refused_.ok();
}

void ShardMachine::FillRegistration(v1::RegisterServerRequest* req) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (range_) {
    req->set_total_elements(total_elements_);
    req->set_offset(range_->offset);
    req->set_length(range_->length);
  }
  if (!store_.initialized()) return;
  req->set_version(store_.version());
  const std::optional<StepMembers>& members = members_ ? members_ : last_members_;
  if (!members) return;
  req->set_has_participants(true);
  req->set_participants_step(members->step);
  for (uint64_t id : members->participants) req->add_participants(id);
}

bool ShardMachine::range_known() const {
  std::lock_guard<std::mutex> lock(mu_);
  return range_.has_value();
}

std::optional<ShardRange> ShardMachine::range() const {
  std::lock_guard<std::mutex> lock(mu_);
  return range_;
}

}  // namespace loco

#include "server/ticket_check.h"

#include <algorithm>

#include "common/log.h"

namespace loco {

Status TicketCheck::Learn(const std::string& key) {
  if (key.empty()) return Status::Ok();
  auto learned = WorkerTicketKey::FromBytes(key);
  if (!learned.ok()) {
    return learned.status().Annotate("the coordinator's worker-ticket key");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (key_ && key_->id() == learned->id()) return Status::Ok();
  if (key_) {
    LOG_INFO("the coordinator signs worker tickets with a new key ("
             << learned->id() << ", was " << key_->id() << "); tickets of the old one are refused");
    retired_ids_.push_back(key_->id());
    if (retired_ids_.size() > kRetiredKeys) retired_ids_.pop_front();
  }
  key_ = std::make_shared<const WorkerTicketKey>(std::move(learned).value());
  return Status::Ok();
}

bool TicketCheck::has_key() const {
  std::lock_guard<std::mutex> lock(mu_);
  return key_ != nullptr;
}

Status TicketCheck::Check(uint64_t worker_id, std::string_view ticket, const char* rpc) const {
  // Built only for a refusal: the accepted call is the one on the step's path.
  const auto who = [&] { return std::string(rpc) + " for worker " + std::to_string(worker_id); };
  if (ticket.empty()) {
    if (!required_) return Status::Ok();
    return PermissionDenied(who() +
                            " carries no ticket; a worker acts only as itself, with the "
                            "ticket its Join returned");
  }
  std::shared_ptr<const WorkerTicketKey> key;
  {
    std::lock_guard<std::mutex> lock(mu_);
    key = key_;
  }
  if (!key) {
    if (!required_) return Status::Ok();
    return Unavailable(who() +
                       ": this server has not learned the coordinator's ticket key yet "
                       "(it learns it when it registers); retry");
  }
  const std::string_view key_id = WorkerTicketKey::KeyIdOf(ticket);
  if (key_id.empty()) {
    return PermissionDenied(who() + ": the ticket is not shaped like one (" +
                            std::to_string(WorkerTicketKey::kTicketChars) +
                            " characters, as Join returns it)");
  }
  if (key_id == key->id()) {
    if (key->Verify(worker_id, ticket)) return Status::Ok();
    return PermissionDenied(who() + ": the ticket is not worker " + std::to_string(worker_id) +
                            "'s (a worker acts only as itself)");
  }
  bool retired = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    retired = std::find(retired_ids_.begin(), retired_ids_.end(), key_id) != retired_ids_.end();
  }
  if (retired) {
    return PermissionDenied(who() +
                            ": the ticket is signed with an earlier key of the "
                            "coordinator, which restarted without a kept ticket key; "
                            "join again");
  }
  key_wanted_ = true;
  return Unavailable(who() + ": the ticket is signed with a key this server has not learned (key " +
                     std::string(key_id) + ", this server holds " + key->id() +
                     "); if the coordinator restarted, the server registers again to learn it; "
                     "retry");
}

}  // namespace loco

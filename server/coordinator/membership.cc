#include "server/coordinator/membership.h"

#include <algorithm>
#include <iterator>

#include "common/host_port.h"
#include "common/log.h"

namespace loco {

Membership::Membership(MembershipOptions options, Clock clock)
    : options_(options),
      clock_(std::move(clock)),
      server_addresses_(options.num_shards),
      server_identities_(options.num_shards),
      shard_open_step_(options.num_shards),
      registered_(options.num_shards, false) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
  next_worker_id_ = options_.incarnation * kIdsPerIncarnation + 1;
  if (options_.incarnation > 0 && options_.recovery_window.count() > 0) {
    recovered_ = false;
    recovery_until_ = clock_() + options_.recovery_window;
    recovery_floor_ = clock_() + std::min(options_.min_recovery, options_.recovery_window);
  }
}

Status Membership::ValidateOptions(const MembershipOptions& o) {
  if (o.num_shards == 0) return InvalidArgument("num_shards must be >= 1");
  if (o.shard_align == 0 || o.shard_align % 32 != 0) {
    return InvalidArgument("shard alignment " + std::to_string(o.shard_align) +
                           " must be a positive multiple of 32 (the LoCo block size divides it)");
  }
  if (o.heartbeat_timeout.count() <= 0) return InvalidArgument("heartbeat timeout must be > 0 ms");
  if (o.incarnation >= (uint64_t{1} << 33)) {
    return InvalidArgument("incarnation " + std::to_string(o.incarnation) + " must be below "
                           "2^33, so that worker ids stay below 2^53");
  }
  if (o.recovery_window.count() < 0) return InvalidArgument("recovery window must be >= 0 ms");
  if (o.max_workers == 0 || o.max_workers > kMaxMembers) {
    return InvalidArgument("max workers " + std::to_string(o.max_workers) + " must be in [1, " +
                           std::to_string(kMaxMembers) + "]");
  }
  return Status::Ok();
}

void Membership::ExpireOverdue() {
  const auto now = clock_();
  for (auto it = members_.begin(); it != members_.end();) {
    if (it->second.deadline <= now) {
      ++epoch_;
      LOG_WARN("worker " << it->first << " (" << it->second.name
                         << ") missed its heartbeats; expired, epoch " << epoch_);
      it = members_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<uint64_t> Membership::MemberIds() const {
  std::vector<uint64_t> ids;
  ids.reserve(members_.size());
  for (const auto& [id, m] : members_) ids.push_back(id);  // std::map: ascending
  return ids;
}

uint32_t Membership::RankOf(uint64_t worker_id) const {
  return static_cast<uint32_t>(std::distance(members_.begin(), members_.find(worker_id)));
}

StatusOr<uint32_t> Membership::RegisterServer(uint32_t shard_id, const std::string& address,
                                              const std::string& identity,
                                              const ServerReport& report) {
  ExpireOverdue();
  if (shard_id >= options_.num_shards) {
    return InvalidArgument("shard_id " + std::to_string(shard_id) + " is out of range; this " +
                           "cluster has " + std::to_string(options_.num_shards) +
                           " shards (ids 0.." + std::to_string(options_.num_shards - 1) + ")");
  }
  if (address.empty()) return InvalidArgument("address is empty; expected host:port");
  if (address.size() > kMaxAddressBytes) {
    return InvalidArgument("address is " + std::to_string(address.size()) + " bytes; expected " +
                           "host:port of at most " + std::to_string(kMaxAddressBytes) + " bytes");
  }
  if (Status usable = CheckHostPort(address); !usable.ok()) {
    return InvalidArgument("address '" + address + "': " + usable.message());
  }
  std::string& bound = server_identities_[shard_id];
  if (!identity.empty() && !bound.empty() && identity != bound) {
    return PermissionDenied("shard " + std::to_string(shard_id) + " is registered at " +
                            server_addresses_[shard_id] + " by another server identity; only "
                            "that server (the same certificate or credential) may change its "
                            "address");
  }
  std::vector<ShardRange> ranges_to_fix;
  LOCO_RETURN_IF_ERROR(CheckReport(shard_id, report, &ranges_to_fix));
  // Checked: from here on the registration changes state.
  AdoptReport(shard_id, report, std::move(ranges_to_fix));
  registered_[shard_id] = true;
  if (!identity.empty()) bound = identity;
  std::string& slot = server_addresses_[shard_id];
  if (!slot.empty() && slot != address) {
    LOG_WARN("shard " << shard_id << " re-registered: " << slot << " -> " << address);
  }
  slot = address;
  return options_.num_shards;
}

StatusOr<JoinResult> Membership::Join(const std::string& name, uint64_t total_elements) {
  ExpireOverdue();
  if (total_elements == 0) {
    return InvalidArgument("total_elements is 0; a worker must report its model size");
  }
  if (name.size() > kMaxNameBytes) {
    return InvalidArgument("name is " + std::to_string(name.size()) + " bytes; at most " +
                           std::to_string(kMaxNameBytes) + " (a hostname or pod name)");
  }
  if (members_.size() >= options_.max_workers) {
    return ResourceExhausted("the cluster already has " + std::to_string(members_.size()) +
                             " workers, the most it admits (--max-workers " +
                             std::to_string(options_.max_workers) + "); wait for one to leave");
  }
  // Checked before MakeShardMap, whose arithmetic must not see absurd sizes.
  const uint64_t max_total = kMaxShardElements * options_.num_shards;
  if (total_elements_ == 0 && total_elements > max_total) {
    return InvalidArgument("total_elements " + std::to_string(total_elements) + " is more than " +
                           std::to_string(options_.num_shards) + " shard(s) can hold: a shard's "
                           "fp32 copy must fit one gRPC message (< 2 GiB), at most " +
                           std::to_string(kMaxShardElements) + " elements per shard; "
                           "run more servers");
  }
  if (total_elements_ != 0 && total_elements != total_elements_) {
    return FailedPrecondition("model size " + std::to_string(total_elements) +
                              " differs from the cluster's " + std::to_string(total_elements_) +
                              " (fixed by the first worker); every worker must train the same "
                              "model");
  }
  if (next_worker_id_ >= (options_.incarnation + 1) * kIdsPerIncarnation) {
    return ResourceExhausted("this coordinator has issued " +
                             std::to_string(kIdsPerIncarnation - 1) + " worker ids, all one "
                             "start may; restart it to issue more");
  }
  if (total_elements_ == 0) {
    auto ranges = ShardMapFor(total_elements);
    if (!ranges.ok()) return ranges.status();
    ranges_ = std::move(ranges).value();
    total_elements_ = total_elements;
  }
  const uint64_t id = next_worker_id_++;
  members_[id] = Member{name, clock_() + options_.heartbeat_timeout, 0};
  ++epoch_;
  LOG_INFO("worker " << id << " (" << name << ") joined; epoch " << epoch_ << ", world "
                     << members_.size());
  return JoinResult{id, RankOf(id), static_cast<uint32_t>(members_.size())};
}

StatusOr<uint64_t> Membership::Leave(uint64_t worker_id) {
  ExpireOverdue();
  auto it = members_.find(worker_id);
  if (it == members_.end()) {
    return NotFound("worker " + std::to_string(worker_id) + " is not a member (unknown, left or "
                    "expired)");
  }
  members_.erase(it);
  ++epoch_;
  LOG_INFO("worker " << worker_id << " left; epoch " << epoch_ << ", world " << members_.size());
  return epoch_;
}

StatusOr<HeartbeatResult> Membership::Heartbeat(uint64_t worker_id, uint64_t step) {
  ExpireOverdue();
  auto it = members_.find(worker_id);
  if (it == members_.end() && FromEarlierIncarnation(worker_id) && recovering()) {
    return Resume(worker_id, step);
  }
  if (it == members_.end()) {
    return NotFound("worker " + std::to_string(worker_id) +
                    " is not a member (unknown, left or expired); join again");
  }
  it->second.deadline = clock_() + options_.heartbeat_timeout;
  it->second.step = step;
  return HeartbeatResult{epoch_, RankOf(worker_id), static_cast<uint32_t>(members_.size()),
                         recovering()};
}

MembershipView Membership::View() {
  ExpireOverdue();
  MembershipView v;
  v.epoch = epoch_;
  v.worker_ids = MemberIds();
  v.total_elements = total_elements_;
  v.block_size = options_.shard_align;
  bool all_registered = true;
  for (uint32_t k = 0; k < options_.num_shards; ++k) {
    ShardAssignment s;
    s.shard_id = k;
    if (!ranges_.empty()) s.range = ranges_[k];
    s.address = server_addresses_[k];
    all_registered = all_registered && !s.address.empty();
    v.shards.push_back(std::move(s));
  }
  v.ready = total_elements_ > 0 && all_registered;
  return v;
}

StatusOr<StepParticipants> Membership::Participants(uint64_t step, uint32_t shard_id,
                                                    uint32_t pushes_received) {
  ExpireOverdue();
  if (shard_id >= options_.num_shards) {
    return InvalidArgument("shard_id " + std::to_string(shard_id) + " is out of range; this " +
                           "cluster has " + std::to_string(options_.num_shards) + " shards");
  }
  const bool still_recovering = recovering();
  if (still_recovering && frozen_.count(step) == 0) {
    return Unavailable("the coordinator is recovering after a restart and no server reported "
                       "step " + std::to_string(step) + " open; retry");
  }
  if (frozen_.count(step) == 0 && step > 0 && step - 1 > NewestKnownStep()) {
    // A shard opens step t only after step t - 1 completed, which it asked
    // about (or reported): a step further ahead was not reached by the
    // cluster, and freezing it would let a restored shard be moved there.
    return FailedPrecondition("step " + std::to_string(step) +
                              " is ahead of the cluster: the "
                              "newest step a server asked about or reported is " +
                              std::to_string(NewestKnownStep()) + ", so the next one is " +
                              std::to_string(NewestKnownStep() + 1));
  }
  shard_open_step_[shard_id] = step;
  auto it = frozen_.find(step);
  if (it == frozen_.end()) {
    frozen_.emplace(step, MemberIds());
    ForgetOldSteps();
    it = frozen_.find(step);  // open for this shard: never forgotten
  }
  StepParticipants r;
  r.step = step;
  r.epoch = epoch_;
  for (uint64_t id : it->second) {
    // While recovering, a participant that has not resumed yet is still
    // waited for: its push may come once its heartbeat has brought it back.
    if (members_.count(id) || still_recovering) r.live.push_back(id);
  }
  if (r.live.empty() && pushes_received == 0 && !members_.empty()) {
    it->second = MemberIds();
    r.live = it->second;
    LOG_INFO("step " << step << ": every participant departed before any push; re-frozen with "
                     << r.live.size() << " current members");
  }
  r.participants = it->second;
  return r;
}

uint64_t Membership::NewestKnownStep() const {
  const uint64_t frozen = frozen_.empty() ? 0 : frozen_.rbegin()->first;
  return std::max(frozen, newest_reported_version_);
}

void Membership::ForgetOldSteps() {
  const auto is_open = [this](uint64_t step) {
    for (const std::optional<uint64_t>& open : shard_open_step_) {
      if (open == step) return true;
    }
    return false;
  };
  size_t open = 0;
  for (const auto& [step, participants] : frozen_) open += is_open(step) ? 1 : 0;
  for (auto it = frozen_.begin(); it != frozen_.end() && frozen_.size() - open > kStepWindow;) {
    it = is_open(it->first) ? std::next(it) : frozen_.erase(it);
  }
}

}  // namespace loco

// Membership after a restart: what the servers report when they register
// again, workers of an earlier incarnation resuming under their id, and the
// recovery phase (server/coordinator/membership.h). Rebuilt, not persisted:
// every fact the coordinator holds is held by a server or a worker.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "server/coordinator/membership.h"

namespace loco {
namespace {

std::string RangeText(ShardRange r) {
  return "[" + std::to_string(r.offset) + ", " + std::to_string(r.offset + r.length) + ")";
}

}  // namespace

StatusOr<std::vector<ShardRange>> Membership::ShardMapFor(uint64_t total_elements) const {
  // Checked before MakeShardMap, whose arithmetic must not see absurd sizes.
  const uint64_t max_total = kMaxShardElements * options_.num_shards;
  if (total_elements > max_total) {
    return InvalidArgument("total_elements " + std::to_string(total_elements) + " is more than " +
                           std::to_string(options_.num_shards) +
                           " shard(s) can hold: a shard's fp32 copy "
                           "must fit one gRPC message (< 2 GiB), at most " +
                           std::to_string(kMaxShardElements) +
                           " elements per shard; run more servers");
  }
  auto ranges = MakeShardMap(total_elements, options_.num_shards, options_.shard_align);
  if (!ranges.ok()) return ranges.status();
  for (const ShardRange& r : *ranges) {
    if (r.length > kMaxShardElements) {
      return InvalidArgument("total_elements " + std::to_string(total_elements) +
                             " gives a shard of " + std::to_string(r.length) +
                             " elements; at most " + std::to_string(kMaxShardElements) +
                             " fit one gRPC message; run more servers");
    }
  }
  return ranges;
}

Status Membership::CheckReport(uint32_t shard_id, const ServerReport& report,
                               std::vector<ShardRange>* ranges_to_fix) const {
  ranges_to_fix->clear();
  if (report.total_elements == 0) return Status::Ok();  // it knows nothing yet
  const std::string who = "shard " + std::to_string(shard_id) + "'s server";
  if (total_elements_ != 0 && report.total_elements != total_elements_) {
    return FailedPrecondition(who + " holds a model of " + std::to_string(report.total_elements) +
                              " elements, this coordinator one of " +
                              std::to_string(total_elements_) +
                              "; the servers and the coordinator must belong to one run");
  }
  std::vector<ShardRange> ranges = ranges_;
  if (total_elements_ == 0) {
    auto made = ShardMapFor(report.total_elements);
    if (!made.ok()) return made.status().Annotate(who + " reports a model that");
    ranges = std::move(made).value();
  }
  const ShardRange expected = ranges[shard_id];
  if (expected.offset != report.range.offset || expected.length != report.range.length) {
    return FailedPrecondition(
        who + " owns " + RangeText(report.range) + " of " + std::to_string(report.total_elements) +
        " elements, but this coordinator's layout (" + std::to_string(options_.num_shards) +
        " shards aligned to " + std::to_string(options_.shard_align) + ") gives it " +
        RangeText(expected) +
        "; was the coordinator restarted with other --num-servers or --shard-align?");
  }
  if (total_elements_ == 0) *ranges_to_fix = std::move(ranges);
  return Status::Ok();
}

void Membership::AdoptReport(uint32_t shard_id, const ServerReport& report,
                             std::vector<ShardRange> ranges_to_fix) {
  if (report.total_elements > 0) cluster_reported_ = true;
  newest_reported_version_ = std::max(newest_reported_version_, report.version);
  if (!ranges_to_fix.empty()) {
    ranges_ = std::move(ranges_to_fix);
    total_elements_ = report.total_elements;
    LOG_INFO("model size " << total_elements_ << " learnt from shard " << shard_id
                           << "'s server");
  }
  if (!report.has_participants || report.participants.empty()) return;
  std::vector<uint64_t> participants = report.participants;
  std::sort(participants.begin(), participants.end());
  participants.erase(std::unique(participants.begin(), participants.end()), participants.end());
  if (report.participants_step == report.version && !recovered_) {
    // The open step, frozen by the coordinator before the restart: every
    // shard must keep waiting for the same workers.
    auto [it, added] = frozen_.emplace(report.version, participants);
    if (added) {
      LOG_INFO("step " << report.version << ": participants (" << participants.size()
                       << ") learnt from shard " << shard_id << "'s server");
      ForgetOldSteps();
    } else if (it->second != participants) {
      LOG_WARN("step " << report.version << ": shard " << shard_id << "'s server reports "
                       << participants.size() << " participants, another reported "
                       << it->second.size() << "; keeping the first");
    }
  }
  if (!recovered_) {
    reported_participants_.insert(reported_participants_.end(), participants.begin(),
                                  participants.end());
  }
}

StatusOr<HeartbeatResult> Membership::Resume(uint64_t worker_id, uint64_t step) {
  if (members_.size() >= options_.max_workers) {
    return ResourceExhausted("worker " + std::to_string(worker_id) +
                             " cannot resume: the cluster already has " +
                             std::to_string(members_.size()) + " workers (--max-workers)");
  }
  members_[worker_id] = Member{"resumed", clock_() + options_.heartbeat_timeout, step};
  ++epoch_;
  LOG_INFO("worker " << worker_id << " resumed after the coordinator's restart at step " << step
                     << "; epoch " << epoch_ << ", world " << members_.size());
  // This resume may be the one the recovery waited for: recovering() then
  // ends it, and the answer is final.
  return HeartbeatResult{epoch_, RankOf(worker_id), static_cast<uint32_t>(members_.size()),
                         recovering()};
}

bool Membership::recovering() {
  if (recovered_) return false;
  const bool every_shard = std::all_of(registered_.begin(), registered_.end(),
                                       [](bool registered) { return registered; });
  const bool every_participant =
      std::all_of(reported_participants_.begin(), reported_participants_.end(),
                  [this](uint64_t id) { return members_.count(id) != 0; });
  const auto now = clock_();
  const bool timed_out = now >= recovery_until_;
  // A cluster that existed but whose servers named no participant (no step
  // completed yet) waits at least min_recovery for its workers' heartbeats;
  // a fresh one, or one whose workers the servers named, does not.
  const bool named = !reported_participants_.empty();
  const bool long_enough = !cluster_reported_ || named || now >= recovery_floor_;
  if ((every_shard && every_participant && long_enough) || timed_out) {
    recovered_ = true;
    reported_participants_.clear();
    LOG_INFO("recovery " << (timed_out ? "ended by its window" : "complete") << ": "
                         << members_.size() << " workers, incarnation " << options_.incarnation);
  }
  return !recovered_;
}

}  // namespace loco

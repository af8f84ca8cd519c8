// Membership: the coordinator's state as pure logic, with an injectable clock
// so tests drive heartbeat expiry without sleeping.
//
// * Worker ids are monotonic from 1 and never reused; 0 never names a worker.
// * The epoch increments on every join, leave and expiry (one per worker).
// * A worker expires when no Join/Heartbeat arrived for heartbeat_timeout.
//   Expiry is lazy: every public call first expires overdue workers, so an
//   expired worker is gone from every answer.
// * rank = index of the worker id in the ascending member list; world = count.
// * Step participants: the first query for step t freezes participants(t) to
//   the members of that moment, so that every shard waits for the same set.
//   `live` = participants that are still members. If every frozen participant
//   has departed and the asking shard has received no push for t, the set is
//   re-frozen from the current members (a step never waits for nobody while
//   workers exist). At most kStepWindow steps are remembered besides each
//   shard's open step (the step it asked about last, which it is
//   collecting): when more are, the oldest step no shard has open is
//   forgotten, so queries for many other steps (far ahead, or long
//   completed) never evict a set a shard is still waiting on. A forgotten
//   step asked about again freezes anew (it has long completed).
// * The first Join fixes the model size (and with it the shard map); a later
//   Join with a different size gets FailedPrecondition. The view is ready
//   once the size is fixed and every shard's server registered.
//
// Not thread-safe: the owner (CoordinatorService) serialises calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/shard_layout.h"

namespace loco {

struct MembershipOptions {
  uint32_t num_shards = 1;
  uint32_t shard_align = 4096;  // multiple of 32
  std::chrono::milliseconds heartbeat_timeout{5000};
  // Members admitted at once (--max-workers); further joins get
  // ResourceExhausted until one leaves. In [1, Membership::kMaxMembers].
  size_t max_workers = 1024;
  // Which start of the coordinator this is (ClusterView.incarnation; the
  // coordinator's main persists or derives it so that it only grows).
  // Worker ids issued are incarnation * kIdsPerIncarnation + 1, 2, ..., so
  // they never repeat across restarts. 0 (tests) issues 1, 2, ...
  uint64_t incarnation = 0;
  // With incarnation > 0: how long after the start workers of an earlier
  // incarnation may resume under their id (Heartbeat with their ticket) and
  // the open steps the servers report wait for their participants. The
  // recovery ends earlier once every shard registered and every reported
  // participant is back. 0 = none (tests), the coordinator's main sets it.
  std::chrono::milliseconds recovery_window{0};
  // When a server reports a model (the cluster existed before the
  // restart) but no participants (no step completed yet), the recovery
  // lasts at least this long, so that every live worker's heartbeat
  // arrives before it ends: nothing names those workers. The coordinator's
  // main sets two heartbeat intervals and 5 s (a worker's channel may take
  // seconds to reconnect).
  std::chrono::milliseconds min_recovery{0};
};

// What a server reports when it registers (RegisterServerRequest): all zero
// before it knows its range.
struct ServerReport {
  uint64_t total_elements = 0;
  ShardRange range;
  uint64_t version = 0;
  // The participants of step participants_step (== version: the open step,
  // frozen by the server's coordinator; otherwise the last completed one).
  bool has_participants = false;
  uint64_t participants_step = 0;
  std::vector<uint64_t> participants;
};

struct ShardAssignment {
  uint32_t shard_id = 0;
  ShardRange range;      // zero until the model size is fixed
  std::string address;   // empty until the shard's server registered
};

struct MembershipView {
  uint64_t epoch = 0;
  std::vector<uint64_t> worker_ids;  // ascending
  uint64_t total_elements = 0;       // 0 until the first Join
  uint32_t block_size = 0;           // the shard alignment
  std::vector<ShardAssignment> shards;
  bool ready = false;
};

struct JoinResult {
  uint64_t worker_id = 0;
  uint32_t rank = 0;
  uint32_t world_size = 0;
};

struct HeartbeatResult {
  uint64_t epoch = 0;
  uint32_t rank = 0;
  uint32_t world_size = 0;
  bool provisional = false;  // still recovering: rank and world count the resumed only
};

struct StepParticipants {
  uint64_t step = 0;
  std::vector<uint64_t> participants;  // ascending, frozen
  std::vector<uint64_t> live;          // ascending, subset of participants
  uint64_t epoch = 0;
};

class Membership {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  static constexpr size_t kStepWindow = 64;
  // Bounds on what a request may ask for (each refused with InvalidArgument
  // or ResourceExhausted, naming the limit):
  // * a shard's fp32 copy travels in one gRPC message, which gRPC caps below
  //   2 GiB: 500'000'000 elements (2.0e9 bytes) leave room for the framing;
  static constexpr uint64_t kMaxShardElements = 500'000'000;
  // * names and addresses are for logs and dialling, not payloads;
  static constexpr size_t kMaxNameBytes = 256;
  static constexpr size_t kMaxAddressBytes = 1024;
  // * every member costs memory here and in each frozen step, and is waited
  //   for by every shard: far beyond any real data-parallel world.
  static constexpr size_t kMaxMembers = 65536;
  // Worker ids per incarnation (see MembershipOptions::incarnation); joins
  // beyond get ResourceExhausted (restart the coordinator). Ids stay below
  // 2^53 for 2^33 incarnations, so that JSON readers keep them exact.
  static constexpr uint64_t kIdsPerIncarnation = uint64_t{1} << 20;

  // `clock` defaults to std::chrono::steady_clock::now.
  explicit Membership(MembershipOptions options, Clock clock = nullptr);

  static Status ValidateOptions(const MembershipOptions& options);

  // Records (or, after a server restart, replaces) the address of a shard's
  // server. Returns the number of shards. `identity` is who registers
  // (security/caller_role.h): the first non-empty identity to register a
  // shard binds it, and a later registration of that shard under another
  // identity is refused with PermissionDenied, changing nothing. Empty =
  // roles not separated: unbound, as before roles existed.
  //
  // `report` (after a coordinator restart, the servers' memory of the
  // cluster): a model size fixes the coordinator's when it has none; a size
  // or range other than the coordinator's own layout is refused with
  // FailedPrecondition naming both (the coordinator was restarted with other
  // flags), changing nothing; the open step's participant set is adopted
  // for that step if the step is not frozen here yet, and while recovering
  // every reported participant is waited for.
  StatusOr<uint32_t> RegisterServer(uint32_t shard_id, const std::string& address,
                                    const std::string& identity = std::string(),
                                    const ServerReport& report = ServerReport());
  StatusOr<JoinResult> Join(const std::string& name, uint64_t total_elements);
  // Returns the new epoch. NotFound for unknown or expired workers.
  StatusOr<uint64_t> Leave(uint64_t worker_id);
  // NotFound for unknown or expired workers (they must join again). While
  // recovering, a worker of an earlier incarnation resumes under its id
  // (the caller has checked its ticket).
  StatusOr<HeartbeatResult> Heartbeat(uint64_t worker_id, uint64_t step);
  MembershipView View();
  // The participants of `step` for shard `shard_id` (the first question
  // freezes them; see StepParticipantsRequest). FailedPrecondition, changing
  // nothing, for a step not frozen that is more than one past the newest
  // step a server asked about or reported (NewestKnownStep): no shard can
  // have opened it.
  StatusOr<StepParticipants> Participants(uint64_t step, uint32_t shard_id,
                                          uint32_t pushes_received);

  uint64_t epoch() const { return epoch_; }
  uint64_t incarnation() const { return options_.incarnation; }
  // Whether the recovery after a restart is still going on (see
  // MembershipOptions::recovery_window): the readiness probe says not
  // ready, and questions about steps no server reported are answered with
  // Unavailable (retry), so that no step is frozen before its workers are
  // back.
  bool recovering();
  // Whether `worker_id` was issued by an earlier incarnation.
  bool FromEarlierIncarnation(uint64_t worker_id) const {
    return worker_id / kIdsPerIncarnation < options_.incarnation;
  }
  // How many steps' participant sets are remembered (for tests and metrics):
  // at most kStepWindow + num_shards.
  size_t remembered_steps() const { return frozen_.size(); }

 private:
  struct Member {
    std::string name;
    std::chrono::steady_clock::time_point deadline;
    uint64_t step = 0;
  };
  void ExpireOverdue();
  uint32_t RankOf(uint64_t worker_id) const;
  std::vector<uint64_t> MemberIds() const;
  // The newest step a server asked about (frozen, not yet forgotten: the
  // newest are kept) or reported as its version when it registered.
  uint64_t NewestKnownStep() const;
  // Forgets the oldest frozen steps that no shard has open until at most
  // kStepWindow are left besides the open ones.
  void ForgetOldSteps();
  // The shard map for a model of `total_elements` (checked), without
  // fixing it; FixModelSize fixes it.
  StatusOr<std::vector<ShardRange>> ShardMapFor(uint64_t total_elements) const;
  // RegisterServer's checks of `report` against this coordinator's layout
  // (membership_recovery.cc); OK when it agrees or brings nothing.
  Status CheckReport(uint32_t shard_id, const ServerReport& report,
                     std::vector<ShardRange>* ranges_to_fix) const;
  // Adopts `report`'s model size and open step (after CheckReport).
  void AdoptReport(uint32_t shard_id, const ServerReport& report,
                   std::vector<ShardRange> ranges_to_fix);
  // Admits worker_id of an earlier incarnation again (Heartbeat).
  StatusOr<HeartbeatResult> Resume(uint64_t worker_id, uint64_t step);

  MembershipOptions options_;
  Clock clock_;
  uint64_t epoch_ = 0;
  uint64_t next_worker_id_ = 1;
  std::map<uint64_t, Member> members_;
  uint64_t total_elements_ = 0;
  std::vector<ShardRange> ranges_;           // empty until the model size is fixed
  std::vector<std::string> server_addresses_;  // per shard; empty = not registered
  std::vector<std::string> server_identities_;  // per shard; empty = unbound
  std::map<uint64_t, std::vector<uint64_t>> frozen_;  // step -> participants
  // Per shard, the step it asked about last; nullopt before its first query.
  std::vector<std::optional<uint64_t>> shard_open_step_;
  uint64_t newest_reported_version_ = 0;  // the largest ServerReport::version
  // Recovery (membership_recovery.cc): until when it may last, whether it
  // ended, which shards registered since the start, and the participants
  // of the open steps the servers reported.
  std::chrono::steady_clock::time_point recovery_until_{};
  std::chrono::steady_clock::time_point recovery_floor_{};  // see min_recovery
  bool cluster_reported_ = false;  // a server reported a model size
  bool recovered_ = true;
  std::vector<bool> registered_;
  std::vector<uint64_t> reported_participants_;
};

}  // namespace loco

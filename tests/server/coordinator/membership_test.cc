#include "server/coordinator/membership.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace loco {
namespace {

using std::chrono::milliseconds;

class FakeClock {
 public:
  std::chrono::steady_clock::time_point now() const { return now_; }
  void Advance(milliseconds d) { now_ += d; }
  Membership::Clock fn() {
    return [this] { return now(); };
  }

 private:
  std::chrono::steady_clock::time_point now_{};
};

MembershipOptions Options(uint32_t shards = 2) {
  MembershipOptions o;
  o.num_shards = shards;
  o.shard_align = 128;
  o.heartbeat_timeout = milliseconds(300);
  return o;
}

// Shard `shard`'s server registers at `version` (as after a restart or a
// restore), so that the coordinator knows the cluster reached it.
void ReportVersion(Membership& m, uint32_t shard, uint64_t version) {
  ServerReport report;
  report.version = version;
  ASSERT_TRUE(
      m.RegisterServer(shard, "127.0.0.1:" + std::to_string(5000 + shard), "", report).ok());
}

TEST(Membership, JoinLeaveEpochsRanksAndIdsNeverReused) {
  FakeClock clock;
  Membership m(Options(), clock.fn());
  EXPECT_EQ(m.epoch(), 0u);
  auto a = m.Join("a", 1000);
  auto b = m.Join("b", 1000);
  auto c = m.Join("c", 1000);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->worker_id, 1u);
  EXPECT_EQ(b->worker_id, 2u);
  EXPECT_EQ(c->worker_id, 3u);
  EXPECT_EQ(c->rank, 2u);
  EXPECT_EQ(c->world_size, 3u);
  EXPECT_EQ(m.epoch(), 3u);

  auto left = m.Leave(2);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(*left, 4u);
  auto hb = m.Heartbeat(3, 7);
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->rank, 1u);  // ids {1, 3}: 3 moved from rank 2 to rank 1
  EXPECT_EQ(hb->world_size, 2u);
  EXPECT_EQ(hb->epoch, 4u);

  EXPECT_EQ(m.Leave(2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.Leave(99).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.epoch(), 4u);  // failed calls change nothing

  auto d = m.Join("d", 1000);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->worker_id, 4u);  // 2 is never reused
  EXPECT_EQ(m.View().worker_ids, (std::vector<uint64_t>{1, 3, 4}));
}

TEST(Membership, HeartbeatsKeepWorkersAliveAndSilenceExpiresThem) {
  FakeClock clock;
  Membership m(Options(), clock.fn());
  ASSERT_TRUE(m.Join("a", 1000).ok());
  ASSERT_TRUE(m.Join("b", 1000).ok());
  const uint64_t epoch = m.epoch();
  clock.Advance(milliseconds(200));
  ASSERT_TRUE(m.Heartbeat(1, 0).ok());
  clock.Advance(milliseconds(200));  // b silent for 400 ms > 300 ms; a for 200 ms
  auto view = m.View();
  EXPECT_EQ(view.worker_ids, (std::vector<uint64_t>{1}));
  EXPECT_EQ(view.epoch, epoch + 1);
  EXPECT_EQ(m.Heartbeat(2, 0).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(m.Heartbeat(1, 0).ok());
  clock.Advance(milliseconds(299));
  EXPECT_TRUE(m.Heartbeat(1, 1).ok());  // 299 ms after its last heartbeat: still a member
  clock.Advance(milliseconds(300));
  EXPECT_EQ(m.Heartbeat(1, 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.epoch(), epoch + 2);
  EXPECT_TRUE(m.View().worker_ids.empty());
}

TEST(Membership, ParticipantsFreezeAtFirstQueryAndTrackDepartures) {
  FakeClock clock;
  Membership m(Options(), clock.fn());
  ASSERT_TRUE(m.Join("a", 1000).ok());
  ASSERT_TRUE(m.Join("b", 1000).ok());
  auto p0 = m.Participants(0, 0, 0);
  ASSERT_TRUE(p0.ok());
  EXPECT_EQ(p0->participants, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(p0->live, (std::vector<uint64_t>{1, 2}));

  ASSERT_TRUE(m.Join("c", 1000).ok());  // joins after step 0 opened
  auto p0b = m.Participants(0, 1, 0);   // another shard asks: same frozen set
  ASSERT_TRUE(p0b.ok());
  EXPECT_EQ(p0b->participants, (std::vector<uint64_t>{1, 2}));

  ASSERT_TRUE(m.Leave(2).ok());
  auto p0c = m.Participants(0, 0, 1);
  ASSERT_TRUE(p0c.ok());
  EXPECT_EQ(p0c->participants, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(p0c->live, (std::vector<uint64_t>{1}));
  EXPECT_EQ(p0c->epoch, m.epoch());

  auto p1 = m.Participants(1, 0, 0);  // step 1 opens with the members of now
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(p1->participants, (std::vector<uint64_t>{1, 3}));

  EXPECT_EQ(m.Participants(0, 2, 0).status().code(), StatusCode::kInvalidArgument);
}

// Queries for many other steps (here by a shard far ahead of another)
// neither grow the memory past its bound nor evict the
// step a shard is still collecting: its frozen set stays the one it had.
TEST(Membership, QueriesFarAheadNeverEvictTheOpenStep) {
  FakeClock clock;
  Membership m(Options(), clock.fn());
  ASSERT_TRUE(m.Join("a", 1000).ok());
  ASSERT_TRUE(m.Join("b", 1000).ok());
  ReportVersion(m, 1, 99);              // shard 1 is at step 99, shard 0 behind it
  auto open = m.Participants(5, 0, 0);  // shard 0 collects step 5 with {1, 2}
  ASSERT_TRUE(open.ok());
  ASSERT_TRUE(m.Join("c", 1000).ok());  // joins while step 5 is open
  for (uint64_t step = 100; step < 100 + 4 * Membership::kStepWindow; ++step) {
    ASSERT_TRUE(m.Participants(step, 1, 0).ok());
    EXPECT_LE(m.remembered_steps(), Membership::kStepWindow + 2);
  }
  auto again = m.Participants(5, 0, 1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->participants, (std::vector<uint64_t>{1, 2}))
      << "step 5 was forgotten and re-frozen with the worker that joined after it opened";
  // Shard 1 moves on to step 5 too: it gets the same set, and the far
  // steps it asked about are forgotten first.
  auto other = m.Participants(5, 1, 0);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->participants, (std::vector<uint64_t>{1, 2}));
  EXPECT_LE(m.remembered_steps(), Membership::kStepWindow + 2);
}

// A shard opens step t only after step t - 1 completed: a question about a
// step more than one past the newest one a server asked about or reported
// is refused and freezes nothing (a restored shard would otherwise be moved
// to it by any member's push).
TEST(Membership, AStepAheadOfTheClusterIsRefusedAndNotFrozen) {
  FakeClock clock;
  Membership m(Options(), clock.fn());
  ASSERT_TRUE(m.Join("a", 1000).ok());
  ASSERT_TRUE(m.Join("b", 1000).ok());
  ASSERT_TRUE(m.Participants(0, 0, 0).ok());
  ASSERT_TRUE(m.Participants(1, 0, 0).ok());
  const size_t remembered = m.remembered_steps();
  for (uint64_t far : {uint64_t{3}, uint64_t{1000}, std::numeric_limits<uint64_t>::max()}) {
    auto refused = m.Participants(far, 1, 0);
    ASSERT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << far;
    EXPECT_NE(refused.status().message().find("ahead of the cluster: the newest step a server "
                                              "asked about or reported is 1, so the next one "
                                              "is 2"),
              std::string::npos)
        << refused.status().message();
  }
  EXPECT_EQ(m.remembered_steps(), remembered);
  // Step 3 was not frozen by the refusals: once step 2 opens, step 3 opens
  // with the members of its own time.
  ASSERT_TRUE(m.Participants(2, 0, 0).ok());
  ASSERT_TRUE(m.Join("c", 1000).ok());
  auto three = m.Participants(3, 0, 0);
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(three->participants, (std::vector<uint64_t>{1, 2, 3}));
  // A server's reported version counts as reached (a restored shard, a
  // restarted coordinator).
  EXPECT_EQ(m.Participants(11, 1, 0).status().code(), StatusCode::kFailedPrecondition);
  ReportVersion(m, 1, 10);
  EXPECT_TRUE(m.Participants(11, 1, 0).ok());
  EXPECT_EQ(m.Participants(13, 1, 0).status().code(), StatusCode::kFailedPrecondition);
}

TEST(Membership, RefreezesWhenAllParticipantsLeftBeforeAnyPush) {
  FakeClock clock;
  Membership m(Options(), clock.fn());
  ASSERT_TRUE(m.Join("a", 1000).ok());
  ReportVersion(m, 0, 5);
  ASSERT_TRUE(m.Participants(5, 0, 0).ok());
  ASSERT_TRUE(m.Leave(1).ok());
  ASSERT_TRUE(m.Join("b", 1000).ok());

  // The asking shard holds a push: the frozen set stays (the step completes
  // with what it has).
  auto with_push = m.Participants(5, 0, 1);
  ASSERT_TRUE(with_push.ok());
  EXPECT_EQ(with_push->participants, (std::vector<uint64_t>{1}));
  EXPECT_TRUE(with_push->live.empty());

  // No push: re-frozen from the current members.
  auto refrozen = m.Participants(5, 1, 0);
  ASSERT_TRUE(refrozen.ok());
  EXPECT_EQ(refrozen->participants, (std::vector<uint64_t>{2}));
  EXPECT_EQ(refrozen->live, (std::vector<uint64_t>{2}));
  // And stays re-frozen for every shard.
  EXPECT_EQ(m.Participants(5, 0, 1)->participants, (std::vector<uint64_t>{2}));

  // Expiry counts as departure too.
  clock.Advance(milliseconds(400));
  ASSERT_TRUE(m.Join("c", 1000).ok());
  auto after_expiry = m.Participants(5, 0, 0);
  ASSERT_TRUE(after_expiry.ok());
  EXPECT_EQ(after_expiry->participants, (std::vector<uint64_t>{3}));
}

TEST(Membership, FirstJoinFixesModelSizeAndMismatchIsRefused) {
  FakeClock clock;
  Membership m(Options(2), clock.fn());
  EXPECT_EQ(m.Join("zero", 0).status().code(), StatusCode::kInvalidArgument);
  // Two shards of 128-aligned blocks need more than 128 elements.
  EXPECT_EQ(m.Join("tiny", 100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.epoch(), 0u);
  EXPECT_EQ(m.View().total_elements, 0u);

  auto a = m.Join("a", 1000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->worker_id, 1u);  // failed joins consumed no id
  auto b = m.Join("b", 1001);
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.epoch(), 1u);
  EXPECT_EQ(m.View().worker_ids.size(), 1u);
}

TEST(Membership, ViewIsReadyWhenSizeFixedAndEveryShardRegistered) {
  FakeClock clock;
  Membership m(Options(2), clock.fn());
  EXPECT_EQ(m.RegisterServer(2, "h:1").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.RegisterServer(0, "").status().code(), StatusCode::kInvalidArgument);
  auto n = m.RegisterServer(0, "h:1");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u);
  EXPECT_FALSE(m.View().ready);
  ASSERT_TRUE(m.Join("a", 1000).ok());
  EXPECT_FALSE(m.View().ready);
  ASSERT_TRUE(m.RegisterServer(1, "h:2").ok());
  auto v = m.View();
  EXPECT_TRUE(v.ready);
  ASSERT_EQ(v.shards.size(), 2u);
  EXPECT_EQ(v.block_size, 128u);
  EXPECT_EQ(v.shards[0].address, "h:1");
  EXPECT_EQ(v.shards[1].address, "h:2");
  EXPECT_EQ(v.shards[0].range.offset, 0u);
  EXPECT_EQ(v.shards[1].range.offset + v.shards[1].range.length, 1000u);
  // A restarted server re-registers under a new address.
  ASSERT_TRUE(m.RegisterServer(1, "h:3").ok());
  EXPECT_EQ(m.View().shards[1].address, "h:3");
}

}  // namespace
}  // namespace loco

namespace loco {
namespace {

TEST(Membership, JoinsPastMaxWorkersAreRefusedWithoutAChange) {
  FakeClock clock;
  MembershipOptions o = Options();
  o.max_workers = 2;
  Membership m(o, clock.fn());
  ASSERT_TRUE(m.Join("a", 1000).ok());
  ASSERT_TRUE(m.Join("b", 1000).ok());
  const uint64_t epoch = m.epoch();
  auto refused = m.Join("c", 1000);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("--max-workers 2"), std::string::npos);
  EXPECT_EQ(m.epoch(), epoch);
  EXPECT_EQ(m.View().worker_ids.size(), 2u);
  o.max_workers = 0;
  EXPECT_FALSE(Membership::ValidateOptions(o).ok());
  o.max_workers = Membership::kMaxMembers + 1;
  EXPECT_FALSE(Membership::ValidateOptions(o).ok());
}

TEST(Membership, AShardIsBoundToTheIdentityThatFirstRegisteredIt) {
  FakeClock clock;
  Membership m(Options(), clock.fn());
  ASSERT_TRUE(m.RegisterServer(0, "a:1", "certificate:loco-server.shard-0").ok());
  // The same server (a restart at a new address): accepted.
  ASSERT_TRUE(m.RegisterServer(0, "a:2", "certificate:loco-server.shard-0").ok());
  auto other = m.RegisterServer(0, "evil:1", "certificate:loco-server");
  EXPECT_EQ(other.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(m.View().shards[0].address, "a:2") << "a refused registration changed nothing";
  // Unseparated roles (empty identity) behave as before: anybody.
  ASSERT_TRUE(m.RegisterServer(1, "b:1").ok());
  ASSERT_TRUE(m.RegisterServer(1, "b:2").ok());
  EXPECT_EQ(m.View().shards[1].address, "b:2");
}

}  // namespace
}  // namespace loco

namespace loco {
namespace {

// After a restart (incarnation 2): the servers' reports rebuild the model
// size and the open step's participants; workers of incarnation 1 resume
// under their ids while the recovery lasts; steps no server reported wait
// (Unavailable); the recovery ends once every shard registered and every
// reported participant is back.
TEST(MembershipRecovery, ServerReportsAndResumingWorkersRebuildTheCluster) {
  FakeClock clock;
  Membership before(Options(), clock.fn());  // the crashed incarnation, 0
  ASSERT_TRUE(before.Join("a", 10000).ok());
  ASSERT_TRUE(before.Join("b", 10000).ok());
  const MembershipView old_view = before.View();

  MembershipOptions options = Options();
  options.incarnation = 2;
  options.recovery_window = milliseconds(5000);
  Membership m(options, clock.fn());
  EXPECT_TRUE(m.recovering());
  EXPECT_TRUE(m.FromEarlierIncarnation(1));
  EXPECT_FALSE(m.FromEarlierIncarnation(2 * Membership::kIdsPerIncarnation + 1));

  ServerReport report;
  report.total_elements = 10000;
  report.range = old_view.shards[0].range;
  report.version = 7;
  report.has_participants = true;
  report.participants_step = 7;
  report.participants = {1, 2};
  ASSERT_TRUE(m.RegisterServer(0, "127.0.0.1:5000", "", report).ok());
  EXPECT_EQ(m.View().total_elements, 10000u);

  auto open = m.Participants(7, 0, 1);  // the reported open step keeps its set
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  EXPECT_EQ(open->participants, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(open->live, (std::vector<uint64_t>{1, 2})) << "not resumed yet, still waited for";
  EXPECT_EQ(m.Participants(8, 0, 1).status().code(), StatusCode::kUnavailable);

  auto resumed = m.Heartbeat(1, 7);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(m.View().worker_ids, (std::vector<uint64_t>{1}));
  EXPECT_TRUE(resumed->provisional) << "world " << resumed->world_size << " counts only the "
                                    << "resumed; the worker must keep its rank";
  // An id of this incarnation that was never issued cannot resume (an
  // earlier incarnation's id is vouched for by its ticket, checked by the
  // service before it asks here).
  EXPECT_EQ(m.Heartbeat(2 * Membership::kIdsPerIncarnation + 5, 7).status().code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(m.Heartbeat(2, 7).ok());
  EXPECT_TRUE(m.recovering()) << "shard 1 has not registered yet";
  report.range = old_view.shards[1].range;
  ASSERT_TRUE(m.RegisterServer(1, "127.0.0.1:5001", "", report).ok());
  EXPECT_FALSE(m.recovering());
  EXPECT_TRUE(m.View().ready);
  auto settled = m.Heartbeat(2, 7);
  ASSERT_TRUE(settled.ok());
  EXPECT_FALSE(settled->provisional);
  EXPECT_EQ(settled->rank, 1u);
  EXPECT_EQ(settled->world_size, 2u);

  auto next = m.Participants(8, 0, 1);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->participants, (std::vector<uint64_t>{1, 2}));
  // A new worker gets an id of this incarnation, above every earlier one.
  auto joined = m.Join("c", 10000);
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->worker_id, 2 * Membership::kIdsPerIncarnation + 1);
}

// Restarted before any step completed: the servers report a model but no
// participants, so nothing names the workers; the recovery still lasts
// min_recovery, long enough for their heartbeats, and they resume instead
// of being unknown. Had a server named them, it would end once they are back.
TEST(MembershipRecovery, WithNoParticipantsNamedTheRecoveryWaitsForHeartbeats) {
  FakeClock clock;
  MembershipOptions options = Options(1);
  options.heartbeat_timeout = milliseconds(10000);
  options.incarnation = 1;
  options.recovery_window = milliseconds(5000);
  options.min_recovery = milliseconds(2000);
  Membership m(options, clock.fn());
  ServerReport report;
  report.total_elements = 1000;
  report.range = ShardRange{0, 1000};
  ASSERT_TRUE(m.RegisterServer(0, "127.0.0.1:5000", "", report).ok());
  EXPECT_TRUE(m.recovering()) << "ended before any worker could heartbeat";
  clock.Advance(milliseconds(1000));
  ASSERT_TRUE(m.Heartbeat(4, 0).ok()) << "a worker of incarnation 0 resumes";
  EXPECT_TRUE(m.recovering());
  clock.Advance(milliseconds(1001));
  EXPECT_FALSE(m.recovering());
  EXPECT_EQ(m.View().worker_ids, (std::vector<uint64_t>{4}));

  Membership named(options, clock.fn());
  report.has_participants = true;
  report.participants_step = 3;  // the last completed step
  report.version = 4;
  report.participants = {4};
  ASSERT_TRUE(named.RegisterServer(0, "127.0.0.1:5000", "", report).ok());
  EXPECT_TRUE(named.recovering());
  auto last = named.Heartbeat(4, 4);
  ASSERT_TRUE(last.ok());
  EXPECT_FALSE(named.recovering()) << "every named worker is back";
  EXPECT_FALSE(last->provisional) << "the resume that ends the recovery answers for good";

  Membership fresh(options, clock.fn());  // a first start: no model reported
  ASSERT_TRUE(fresh.RegisterServer(0, "127.0.0.1:5000").ok());
  EXPECT_FALSE(fresh.recovering());
}

TEST(MembershipRecovery, AReportThatDisagreesWithTheLayoutIsRefusedAndChangesNothing) {
  FakeClock clock;
  MembershipOptions options = Options();
  options.incarnation = 1;
  options.recovery_window = milliseconds(5000);
  Membership m(options, clock.fn());
  ServerReport report;
  report.total_elements = 10000;
  report.range = ShardRange{0, 4096};  // the layout gives shard 0 [0, 5120)
  auto refused = m.RegisterServer(0, "127.0.0.1:5000", "", report);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("--shard-align"), std::string::npos)
      << refused.status().ToString();
  const MembershipView view = m.View();
  EXPECT_EQ(view.total_elements, 0u);
  EXPECT_TRUE(view.shards[0].address.empty());
}

TEST(MembershipRecovery, AfterTheWindowAWorkerOfAnEarlierIncarnationMustJoinAgain) {
  FakeClock clock;
  MembershipOptions options = Options();
  options.incarnation = 1;
  options.recovery_window = milliseconds(5000);
  Membership m(options, clock.fn());
  clock.Advance(milliseconds(5001));
  EXPECT_FALSE(m.recovering());
  EXPECT_EQ(m.Heartbeat(7, 0).status().code(), StatusCode::kNotFound);
  MembershipOptions too_late = Options();
  too_late.incarnation = uint64_t{1} << 33;
  EXPECT_EQ(Membership::ValidateOptions(too_late).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loco

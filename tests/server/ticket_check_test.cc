// TicketCheck's rules (server/ticket_check.h), without a server: which
// ticket lets a shard call act for which worker id, and which refusal says
// what.
#include "server/ticket_check.h"

#include <gtest/gtest.h>

namespace loco {
namespace {

WorkerTicketKey Key(char fill) {
  auto key = WorkerTicketKey::FromBytes(std::string(32, fill));
  EXPECT_TRUE(key.ok());
  return std::move(key).value();
}

bool Says(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(TicketCheck, RequiredTicketsMustBeTheWorkersOwn) {
  const WorkerTicketKey key = Key('k');
  TicketCheck check(/*required=*/true);
  ASSERT_TRUE(check.Learn(key.secret()).ok());
  EXPECT_TRUE(check.Check(7, key.Issue(7), "Push").ok());

  const Status none = check.Check(7, "", "Push");
  EXPECT_EQ(none.code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Says(none, "Push for worker 7 carries no ticket")) << none.message();

  const Status other = check.Check(7, key.Issue(8), "Pull");
  EXPECT_EQ(other.code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Says(other, "the ticket is not worker 7's")) << other.message();

  std::string flipped = key.Issue(7);
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  EXPECT_EQ(check.Check(7, flipped, "Push").code(), StatusCode::kPermissionDenied);

  const Status shapeless = check.Check(7, "0123", "InitShard");
  EXPECT_EQ(shapeless.code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Says(shapeless, "not shaped like one")) << shapeless.message();
}

TEST(TicketCheck, WithoutTheKeyARequiredTicketWaitsAndAnOptionalOneIsNotChecked) {
  const WorkerTicketKey key = Key('k');
  TicketCheck required(/*required=*/true);
  const Status early = required.Check(7, key.Issue(7), "Push");
  EXPECT_EQ(early.code(), StatusCode::kUnavailable) << "retried until the server registers";
  EXPECT_TRUE(Says(early, "has not learned the coordinator's ticket key yet")) << early.message();
  EXPECT_TRUE(required.Learn("").ok()) << "an empty key changes nothing";
  EXPECT_FALSE(required.has_key());

  TicketCheck optional(/*required=*/false);
  EXPECT_TRUE(optional.Check(7, "", "Push").ok());
  EXPECT_TRUE(optional.Check(7, key.Issue(8), "Push").ok()) << "no key: nothing can check it";
  ASSERT_TRUE(optional.Learn(key.secret()).ok());
  EXPECT_TRUE(optional.Check(7, "", "Push").ok()) << "not required: none needed";
  EXPECT_EQ(optional.Check(7, key.Issue(8), "Push").code(), StatusCode::kPermissionDenied)
      << "a ticket given is checked once the key is known";
}

TEST(TicketCheck, ANewKeyRetiresTheOldOnesTicketsAndAnUnknownKeyIsRetried) {
  const WorkerTicketKey first = Key('a'), second = Key('b'), later = Key('c');
  TicketCheck check(/*required=*/true);
  ASSERT_TRUE(check.Learn(first.secret()).ok());
  // A coordinator restarted with a new key; this shard has not re-registered.
  const Status unknown = check.Check(9, later.Issue(9), "Push");
  EXPECT_EQ(unknown.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Says(unknown, "registers again to learn it")) << unknown.message();
  EXPECT_TRUE(check.TakeKeyWanted()) << "the server is asked to register now";
  EXPECT_FALSE(check.TakeKeyWanted()) << "once per ask";

  ASSERT_TRUE(check.Learn(second.secret()).ok());
  EXPECT_TRUE(check.Check(9, second.Issue(9), "Push").ok());
  EXPECT_FALSE(check.TakeKeyWanted()) << "a known key asks for nothing";
  const Status retired = check.Check(3, first.Issue(3), "Pull");
  EXPECT_EQ(retired.code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Says(retired, "join again")) << retired.message();
  EXPECT_FALSE(check.TakeKeyWanted()) << "a retired key is not asked for again";
  ASSERT_TRUE(check.Learn(second.secret()).ok()) << "the same key again: a keepalive";
  EXPECT_TRUE(check.Check(9, second.Issue(9), "Push").ok());
}

TEST(TicketCheck, AMalformedKeyIsRefusedAndTheKeyHeldStays) {
  const WorkerTicketKey key = Key('k');
  TicketCheck check(/*required=*/true);
  ASSERT_TRUE(check.Learn(key.secret()).ok());
  const Status bad = check.Learn("short");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Says(bad, "worker-ticket key")) << bad.message();
  EXPECT_TRUE(check.Check(7, key.Issue(7), "Push").ok());
}

}  // namespace
}  // namespace loco

// AnswerParts: the parts of a step's delta reach the pulls that wait for
// them as they are published (woken every `wake_every` elements and at the
// end), each part once, whatever thread publishes it; an abandoned answer
// releases its waiters; a wait without a beginning ends at its deadline.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "server/answer_parts.h"

namespace loco {
namespace {

using Clock = std::chrono::steady_clock;

v1::PullResponse Header(uint64_t version, uint64_t length) {
  v1::PullResponse h;
  h.set_version(version);
  h.set_is_delta(true);
  h.mutable_params()->set_length(length);
  return h;
}

auto Soon() { return Clock::now() + std::chrono::seconds(5); }

TEST(AnswerParts, WaitersSeePartsAtEachWakeAndTheWholeAnswerOnce) {
  AnswerParts answer(7);
  EXPECT_EQ(answer.version(), 7u);
  size_t taken = 0;
  std::vector<AnswerParts::Part> fresh;
  // Nothing began: the wait ends at its deadline, pending.
  EXPECT_EQ(answer.Wait(Clock::now() + std::chrono::milliseconds(20), &taken, &fresh),
            AnswerParts::State::kPending);
  EXPECT_TRUE(fresh.empty());

  auto data = std::make_shared<const std::string>(500, 'x');
  answer.Begin(Header(7, 1000), data, nullptr, /*wake_every=*/300);
  answer.Publish(0, 128);  // below wake_every: not visible yet
  EXPECT_EQ(answer.Wait(Clock::now() + std::chrono::milliseconds(20), &taken, &fresh),
            AnswerParts::State::kStreaming);
  EXPECT_TRUE(fresh.empty());
  answer.Publish(128, 256);  // 384 published: a wake-up with both parts
  EXPECT_EQ(answer.Wait(Soon(), &taken, &fresh), AnswerParts::State::kStreaming);
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(fresh[0].begin, 0u);
  EXPECT_EQ(fresh[1].begin, 128u);
  EXPECT_EQ(answer.header().version(), 7u);
  EXPECT_EQ(answer.data(), data);
  fresh.clear();
  answer.Publish(384, 616);  // the end: always a wake-up
  EXPECT_EQ(answer.Wait(Soon(), &taken, &fresh), AnswerParts::State::kStreaming);
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].count, 616u);
  EXPECT_EQ(answer.published(), 1000u);
}

TEST(AnswerParts, PartsFromManyThreadsReachEveryWaiterExactlyOnce) {
  constexpr uint64_t kParts = 64, kCount = 128;
  AnswerParts answer(1);
  std::vector<std::vector<AnswerParts::Part>> got(3);
  std::vector<std::thread> waiters;
  for (auto& g : got) {
    waiters.emplace_back([&answer, &g] {
      size_t taken = 0;
      uint64_t elements = 0;
      for (int round = 0; round < 1000 && elements < kParts * kCount; ++round) {
        std::vector<AnswerParts::Part> fresh;
        if (answer.Wait(Soon(), &taken, &fresh) != AnswerParts::State::kStreaming) continue;
        for (const auto& p : fresh) elements += p.count;
        g.insert(g.end(), fresh.begin(), fresh.end());
      }
    });
  }
  answer.Begin(Header(1, kParts * kCount), nullptr, nullptr, /*wake_every=*/3 * kCount);
  std::vector<std::thread> producers;
  for (uint64_t t = 0; t < 4; ++t) {
    producers.emplace_back([&answer, t] {
      for (uint64_t p = t; p < kParts; p += 4) answer.Publish(p * kCount, kCount);
    });
  }
  for (auto& p : producers) p.join();
  for (auto& w : waiters) w.join();
  for (auto& g : got) {
    ASSERT_EQ(g.size(), kParts);
    std::sort(g.begin(), g.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
    for (uint64_t p = 0; p < kParts; ++p) EXPECT_EQ(g[p].begin, p * kCount);
  }
}

TEST(AnswerParts, AbandonReleasesWaitersBeforeAndAfterBegin) {
  AnswerParts before(3);
  std::thread abandon([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    before.Abandon();
  });
  size_t taken = 0;
  std::vector<AnswerParts::Part> fresh;
  EXPECT_EQ(before.Wait(Soon(), &taken, &fresh), AnswerParts::State::kAbandoned);
  abandon.join();
  // Begin after Abandon does not revive it.
  before.Begin(Header(3, 10), nullptr, nullptr, 1);
  EXPECT_EQ(before.Wait(Soon(), &taken, &fresh), AnswerParts::State::kAbandoned);

  AnswerParts midway(4);
  midway.Begin(Header(4, 256), nullptr, nullptr, 1);
  midway.Publish(0, 128);
  EXPECT_EQ(midway.Wait(Soon(), &taken, &fresh), AnswerParts::State::kStreaming);
  midway.Abandon();
  midway.Publish(128, 128);  // ignored
  fresh.clear();
  EXPECT_EQ(midway.Wait(Soon(), &taken, &fresh), AnswerParts::State::kAbandoned);
  EXPECT_TRUE(fresh.empty());
  EXPECT_EQ(midway.published(), 128u);
}

}  // namespace
}  // namespace loco

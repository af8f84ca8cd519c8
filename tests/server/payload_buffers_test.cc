// PayloadBuffers: a closed step's push buffers serve the next step's pushes
// without a new allocation, and the spares stay bounded by one step's
// payloads.
#include "server/payload_buffers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace loco::test {
namespace {

std::vector<std::string> Buffers(const std::vector<size_t>& sizes) {
  std::vector<std::string> out;
  for (size_t n : sizes) out.emplace_back(n, 'x');
  return out;
}

TEST(PayloadBuffers, WithoutSparesTakeGivesAnEmptyString) {
  PayloadBuffers buffers;
  const std::string taken = buffers.Take(1000);
  EXPECT_TRUE(taken.empty());
  EXPECT_EQ(buffers.spares(), 0u);
}

TEST(PayloadBuffers, ARecycledBufferOfTheSameSizeComesBackWithoutReallocation) {
  PayloadBuffers buffers;
  std::vector<std::string> step = Buffers({4000, 4000});
  const char* first = step[0].data();
  const char* second = step[1].data();
  buffers.Recycle(std::move(step));
  ASSERT_EQ(buffers.spares(), 2u);
  EXPECT_GE(buffers.spare_bytes(), 8000u);
  for (int i = 0; i < 2; ++i) {
    std::string taken = buffers.Take(4000);
    EXPECT_EQ(taken.size(), 4000u);  // resize(4000) then writes nothing
    EXPECT_TRUE(taken.data() == first || taken.data() == second);
  }
  EXPECT_EQ(buffers.spares(), 0u);
  EXPECT_TRUE(buffers.Take(4000).empty());
}

TEST(PayloadBuffers, TakeFindsTheExactSizeFirstThenTheSmallestThatFits) {
  PayloadBuffers buffers;
  std::vector<std::string> step = Buffers({9000, 5000, 3000});
  const char* big = step[0].data();
  const char* mid = step[1].data();
  const char* small = step[2].data();
  buffers.Recycle(std::move(step));
  EXPECT_EQ(buffers.Take(9000).data(), big);   // exact, though not the smallest fit
  EXPECT_EQ(buffers.Take(4000).data(), mid);   // the smallest with room
  EXPECT_TRUE(buffers.Take(6000).empty());     // 3000 is too small
  EXPECT_EQ(buffers.spares(), 1u);
  EXPECT_EQ(buffers.Take(100).data(), small);
}

TEST(PayloadBuffers, RecycleReplacesTheSparesSoThatTheyNeverOutnumberOneStep) {
  PayloadBuffers buffers;
  buffers.Recycle(Buffers({1000, 1000, 1000, 1000}));
  EXPECT_EQ(buffers.spares(), 4u);
  // Two workers left: the next step held two payloads.
  buffers.Recycle(Buffers({1000, 1000}));
  EXPECT_EQ(buffers.spares(), 2u);
  // Empty buffers (a payload whose data moved away) are not kept.
  buffers.Recycle(Buffers({0, 1000}));
  EXPECT_EQ(buffers.spares(), 1u);
  buffers.Recycle({});
  EXPECT_EQ(buffers.spares(), 0u);
  EXPECT_EQ(buffers.spare_bytes(), 0u);
}

TEST(PayloadBuffers, GiveKeepsNoMoreThanTheLastRecycleKept) {
  PayloadBuffers buffers;
  buffers.Give(std::string(1000, 'a'));  // nothing recycled yet: freed
  EXPECT_EQ(buffers.spares(), 0u);
  buffers.Recycle(Buffers({1000, 1000}));
  std::string answer = buffers.Take(1000);  // the pull answer's buffer
  ASSERT_EQ(buffers.spares(), 1u);
  const char* answer_data = answer.data();
  buffers.Give(std::move(answer));
  EXPECT_EQ(buffers.spares(), 2u);
  buffers.Give(std::string(1000, 'b'));  // one more than the step had: freed
  EXPECT_EQ(buffers.spares(), 2u);
  buffers.Give(std::string());  // empty: not kept
  EXPECT_EQ(buffers.spares(), 2u);
  const char* a = buffers.Take(1000).data();
  const char* b = buffers.Take(1000).data();
  EXPECT_TRUE(a == answer_data || b == answer_data);
}

// Several gRPC threads assemble pushes of one shard at once: concurrent
// takes and gives each get a whole buffer or none, and the spares stay
// within their bound.
TEST(PayloadBuffers, ConcurrentTakesShareTheSparesOut) {
  constexpr size_t kThreads = 4, kPerThread = 1000;
  PayloadBuffers buffers;
  buffers.Recycle(Buffers(std::vector<size_t>(kThreads * kPerThread / 2, 512)));
  std::atomic<size_t> reused{0};
  // Every thread starts at once, so that their calls really interleave
  // (under ThreadSanitizer, scripts/tsan.sh, a thread that started late
  // would find the others done and no race could show).
  std::atomic<size_t> ready{0};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();  // bounded by the threads' start
      for (size_t i = 0; i < kPerThread; ++i) {
        std::string b = buffers.Take(512);
        if (b.size() == 512) ++reused;
        b.assign(512, 'y');
        buffers.Give(std::move(b));  // kept while below the limit
        (void)buffers.Take(512);     // and taken again, or nothing
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GE(reused.load(), 1u);
  EXPECT_LE(buffers.spares(), kThreads * kPerThread / 2);
}

}  // namespace
}  // namespace loco::test

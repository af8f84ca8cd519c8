// GiveBackOnRelease: the buffer returns to its pool when its last holder
// lets go, exactly once, with its bytes; without a pool it is just freed.
#include "server/give_back_on_release.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace loco {
namespace {

struct Pool {
  std::vector<std::string> returned;
};

void Keep(Pool& to, std::string&& b) { to.returned.push_back(std::move(b)); }

TEST(GiveBackOnRelease, TheLastHolderGivesTheBufferBackOnce) {
  auto pool = std::make_shared<Pool>();
  std::string bytes(1 << 20, 'x');
  const char* storage = bytes.data();
  std::shared_ptr<std::string> first =
      GiveBackOnRelease(std::move(bytes), std::weak_ptr<Pool>(pool), Keep);
  std::shared_ptr<std::string> second = first;
  EXPECT_EQ(first->data(), storage) << "the buffer is moved in, not copied";
  first.reset();
  EXPECT_TRUE(pool->returned.empty()) << "a holder is left";
  second.reset();
  ASSERT_EQ(pool->returned.size(), 1u);
  EXPECT_EQ(pool->returned[0].size(), size_t{1} << 20);
  EXPECT_EQ(pool->returned[0].data(), storage) << "the same allocation comes back";
}

TEST(GiveBackOnRelease, ABufferThatOutlivesItsPoolIsFreed) {
  int calls = 0;
  auto pool = std::make_shared<Pool>();
  std::shared_ptr<std::string> held = GiveBackOnRelease(
      std::string(64, 'y'), std::weak_ptr<Pool>(pool),
      [&calls](Pool&, std::string&&) { ++calls; });
  pool.reset();
  held.reset();  // no pool to return to: freed (ASan would see a leak or a use after free)
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace loco

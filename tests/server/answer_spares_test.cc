// AnswerSpares: an answer's buffer returns to its slot when the last holder
// lets go, serves the next answer of its kind, and is freed instead when
// the slot is taken or the spares are gone.
#include "server/answer_spares.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace loco::test {
namespace {

using Kind = AnswerSpares::Kind;

TEST(AnswerSpares, TheLastHolderGivesTheBufferBackForTheNextAnswer) {
  auto spares = AnswerSpares::Create();
  std::shared_ptr<std::string> first = spares->Make(Kind::kCodes, 100000);
  ASSERT_EQ(first->size(), 100000u);
  first->assign(100000, 'a');
  const char* first_data = first->data();
  std::shared_ptr<const std::string> pull = first;  // a pull still sending it
  first.reset();
  EXPECT_EQ(spares->spare_bytes(), 0u);
  pull.reset();
  EXPECT_GE(spares->spare_bytes(), 100000u);
  std::shared_ptr<std::string> second = spares->Make(Kind::kCodes, 100000);
  EXPECT_EQ(second->data(), first_data);
  EXPECT_EQ(second->size(), 100000u);
  EXPECT_EQ(spares->spare_bytes(), 0u);
}

TEST(AnswerSpares, EachKindHasOneSlot) {
  auto spares = AnswerSpares::Create();
  auto codes = spares->Make(Kind::kCodes, 5000);
  auto scales = spares->Make(Kind::kScales, 160);
  const char* codes_data = codes->data();
  codes.reset();
  scales.reset();
  // Another kind does not take the codes' buffer.
  auto bf16 = spares->Make(Kind::kBf16, 5000);
  EXPECT_NE(bf16->data(), codes_data);
  // Two codes buffers back at once: the second finds the slot taken and is freed.
  auto a = spares->Make(Kind::kCodes, 5000);
  auto b = spares->Make(Kind::kCodes, 5000);
  const size_t before = spares->spare_bytes();  // the scales' spare only
  a.reset();
  const size_t with_one = spares->spare_bytes();
  EXPECT_GE(with_one, before + 5000);
  b.reset();
  EXPECT_EQ(spares->spare_bytes(), with_one);
  // A different size: the spare is resized to it.
  EXPECT_EQ(spares->Make(Kind::kCodes, 7000)->size(), 7000u);
}

TEST(AnswerSpares, ABufferThatOutlivesTheSparesIsFreed) {
  auto spares = AnswerSpares::Create();
  std::shared_ptr<std::string> held = spares->Make(Kind::kBf16, 1000);
  const std::weak_ptr<AnswerSpares> weak = spares;
  spares.reset();
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(held->size(), 1000u);  // still the holder's
  held.reset();  // its deleter finds no spares and frees it (checked under ASan)
}

}  // namespace
}  // namespace loco::test

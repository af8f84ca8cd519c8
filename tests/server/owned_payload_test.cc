// OwnedPayload::FromProto from an rvalue: the same checks and the same
// payload as from a const message, with the data bytes moved, not copied;
// a refused message keeps its bytes.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "server/owned_payload.h"
#include "tests/server/reference.h"

namespace loco::test {
namespace {

constexpr ShardRange kRange{0, 300};

TEST(OwnedPayloadMove, MovedPayloadEqualsTheCopiedOneAndTakesTheBytes) {
  v1::Payload wire = QuantPayload(RandomVector(kRange.length, 7), 0, 4, 128);
  const v1::Payload original = wire;
  auto copied = OwnedPayload::FromProto(original, kRange);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  const char* bytes = wire.data().data();
  auto moved = OwnedPayload::FromProto(std::move(wire), kRange);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->data, copied->data);
  EXPECT_EQ(moved->scales, copied->scales);
  EXPECT_EQ(moved->bits, 4);
  EXPECT_EQ(moved->block_size, 128);
  EXPECT_EQ(moved->data.data(), bytes) << "the bytes were copied, not moved";
  EXPECT_TRUE(wire.data().empty());  // NOLINT(bugprone-use-after-move): moved from on purpose
}

TEST(OwnedPayloadMove, RefusedPayloadKeepsItsBytes) {
  v1::Payload wire = Fp32Payload(RandomVector(kRange.length, 8), 0);
  float nan = std::numeric_limits<float>::quiet_NaN();
  wire.mutable_data()->replace(40, 4, reinterpret_cast<const char*>(&nan), 4);
  const std::string before = wire.data();
  auto refused = OwnedPayload::FromProto(std::move(wire), kRange);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fp32 element 10 is not finite"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(wire.data(), before);  // NOLINT(bugprone-use-after-move): refused, so not moved

  v1::Payload wrong_range = Fp32Payload(RandomVector(kRange.length, 9), 5);
  const std::string kept = wrong_range.data();
  EXPECT_FALSE(OwnedPayload::FromProto(std::move(wrong_range), kRange).ok());
  EXPECT_EQ(wrong_range.data(), kept);  // NOLINT(bugprone-use-after-move)
}

}  // namespace
}  // namespace loco::test

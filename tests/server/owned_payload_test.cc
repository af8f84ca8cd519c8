// OwnedPayload::FromProto from an rvalue: the same checks and the same
// payload as from a const message, with the data bytes moved, not copied;
// a refused message keeps its bytes. OwnedPayload::Check: the same verdict
// as FromProto, copying nothing.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "server/owned_payload.h"
#include "tests/server/reference.h"

namespace loco::test {
namespace {

constexpr ShardRange kOwnedRange{0, 300};

TEST(OwnedPayloadMove, MovedPayloadEqualsTheCopiedOneAndTakesTheBytes) {
  v1::Payload wire = QuantPayload(RandomVector(kOwnedRange.length, 7), 0, 4, 128);
  const v1::Payload original = wire;
  auto copied = OwnedPayload::FromProto(original, kOwnedRange);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  const char* bytes = wire.data().data();
  auto moved = OwnedPayload::FromProto(std::move(wire), kOwnedRange);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->data, copied->data);
  EXPECT_EQ(moved->scales, copied->scales);
  EXPECT_EQ(moved->bits, 4);
  EXPECT_EQ(moved->block_size, 128);
  EXPECT_EQ(moved->data.data(), bytes) << "the bytes were copied, not moved";
  EXPECT_TRUE(wire.data().empty());  // NOLINT(bugprone-use-after-move): moved from on purpose
}

TEST(OwnedPayloadMove, RefusedPayloadKeepsItsBytes) {
  v1::Payload wire = Fp32Payload(RandomVector(kOwnedRange.length, 8), 0);
  float nan = std::numeric_limits<float>::quiet_NaN();
  wire.mutable_data()->replace(40, 4, reinterpret_cast<const char*>(&nan), 4);
  const std::string before = wire.data();
  auto refused = OwnedPayload::FromProto(std::move(wire), kOwnedRange);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fp32 element 10 is not finite"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(wire.data(), before);  // NOLINT(bugprone-use-after-move): refused, so not moved

  v1::Payload wrong_range = Fp32Payload(RandomVector(kOwnedRange.length, 9), 5);
  const std::string kept = wrong_range.data();
  EXPECT_FALSE(OwnedPayload::FromProto(std::move(wrong_range), kOwnedRange).ok());
  EXPECT_EQ(wrong_range.data(), kept);  // NOLINT(bugprone-use-after-move)
}

TEST(OwnedPayloadCheck, GivesFromProtosVerdictForEveryKindOfPayload) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  v1::Payload nan_fp32 = Fp32Payload(RandomVector(kOwnedRange.length, 10), 0);
  nan_fp32.mutable_data()->replace(8, 4, reinterpret_cast<const char*>(&nan), 4);
  v1::Payload short_quant = QuantPayload(RandomVector(kOwnedRange.length, 11), 0, 4, 128);
  short_quant.mutable_data()->pop_back();
  v1::Payload bad_bits = QuantPayload(RandomVector(kOwnedRange.length, 12), 0, 4, 128);
  bad_bits.set_bits(3);
  const v1::Payload cases[] = {
      Fp32Payload(RandomVector(kOwnedRange.length, 13), 0),
      QuantPayload(RandomVector(kOwnedRange.length, 14), 0, 8, 64),
      Fp32Payload(RandomVector(kOwnedRange.length, 15), 7),  // another range
      nan_fp32, short_quant, bad_bits};
  int refused = 0;
  for (const v1::Payload& wire : cases) {
    const Status checked = OwnedPayload::Check(wire, kOwnedRange);
    auto built = OwnedPayload::FromProto(wire, kOwnedRange);
    EXPECT_EQ(checked.ok(), built.ok()) << checked.ToString();
    if (!built.ok()) {
      ++refused;
      EXPECT_EQ(checked.code(), built.status().code());
      EXPECT_EQ(checked.message(), built.status().message());
    }
  }
  EXPECT_EQ(refused, 4);
}

}  // namespace
}  // namespace loco::test

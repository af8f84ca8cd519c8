#include "launch/flat_json.h"

#include <gtest/gtest.h>

namespace loco {
namespace {

TEST(FlatJson, ParsesWorkerEvents) {
  auto ev = ParseFlatJson(
      R"({"event":"step","worker":3,"loss":0.25,"resynced":false,"push_wire_bytes":1.5e6})");
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ((*ev)["event"], "step");
  EXPECT_DOUBLE_EQ(JsonNumber(*ev, "worker", -1), 3);
  EXPECT_DOUBLE_EQ(JsonNumber(*ev, "loss", -1), 0.25);
  EXPECT_DOUBLE_EQ(JsonNumber(*ev, "resynced", -1), 0);
  EXPECT_DOUBLE_EQ(JsonNumber(*ev, "push_wire_bytes", -1), 1.5e6);
  EXPECT_DOUBLE_EQ(JsonNumber(*ev, "missing", 7), 7);
}

TEST(FlatJson, RejectsWhatIsNotAFlatObject) {
  EXPECT_FALSE(ParseFlatJson("I 12:00:00 worker] log line").has_value());
  EXPECT_FALSE(ParseFlatJson(R"({"a":1)").has_value());
  EXPECT_FALSE(ParseFlatJson(R"({"a":{"b":1}})").has_value());
  EXPECT_FALSE(ParseFlatJson(R"({"a":})").has_value());
  EXPECT_TRUE(ParseFlatJson("{}").has_value());
}

TEST(FlatJson, WriterRoundTrips) {
  JsonWriter w;
  w.Add("codec", "lo\"co").Add("steps", 469).Add("acc", 0.8731);
  auto back = ParseFlatJson(w.str());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ((*back)["codec"], "lo\"co");
  EXPECT_DOUBLE_EQ(JsonNumber(*back, "steps", 0), 469);
  EXPECT_NEAR(JsonNumber(*back, "acc", 0), 0.8731, 1e-9);
}

}  // namespace
}  // namespace loco

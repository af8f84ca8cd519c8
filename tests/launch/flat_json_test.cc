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
  // Fractions come back as the very same double.
  JsonWriter exact;
  exact.Add("third", 1.0 / 3.0).Add("sum", 0.1 + 0.2).Add("tiny", 1e-7);
  auto exact_back = ParseFlatJson(exact.str());
  ASSERT_TRUE(exact_back.has_value());
  EXPECT_EQ(JsonNumber(*exact_back, "third", 0), 1.0 / 3.0);
  EXPECT_EQ(JsonNumber(*exact_back, "sum", 0), 0.1 + 0.2);
  EXPECT_EQ(JsonNumber(*exact_back, "tiny", 0), 1e-7);
}

}  // namespace
}  // namespace loco

#include "common/format_double.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace loco {
namespace {

TEST(FormatDouble, ParsesBackToExactlyTheSameValue) {
  for (double value : {1e-7, 0.1 + 0.2, 1.0 / 3, -2.5e-8, 1e300, 0.0, -0.0,
                       std::numeric_limits<double>::max(),
                       std::numeric_limits<double>::min(),
                       std::numeric_limits<double>::denorm_min()}) {
    const std::string text = FormatDouble(value);
    const double parsed = std::strtod(text.c_str(), nullptr);
    EXPECT_EQ(parsed, value) << text;
    EXPECT_EQ(std::signbit(parsed), std::signbit(value)) << text;
  }
}

TEST(FormatDouble, IsTheShortestSuchText) {
  EXPECT_EQ(FormatDouble(1e-7), "1e-07");
  EXPECT_EQ(FormatDouble(0.001), "0.001");
  EXPECT_EQ(FormatDouble(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatDouble(10), "10");
}

TEST(FormatDouble, NamesTheValuesThatAreNotNumbers) {
  EXPECT_EQ(FormatDouble(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(FormatDouble(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(FormatDouble(std::numeric_limits<double>::quiet_NaN()), "nan");
}

// A float's shortest text, where FormatDouble would print all the digits
// of its double: what a message about a float-valued flag shows.
TEST(FormatFloat, IsTheShortestTextThatReadsBackAsTheFloat) {
  EXPECT_EQ(FormatFloat(1.0f - 0x1p-24f), "0.99999994");
  EXPECT_EQ(FormatDouble(1.0f - 0x1p-24f), "0.9999999403953552");
  EXPECT_EQ(FormatFloat(0.001f), "0.001");
  EXPECT_EQ(FormatFloat(10), "10");
  EXPECT_EQ(FormatFloat(std::numeric_limits<float>::infinity()), "inf");
  for (float value : {0.001f, 1e-30f, 0.999999f, 1.0f - 0x1p-24f, 3.4e38f,
                      std::numeric_limits<float>::denorm_min()}) {
    const std::string text = FormatFloat(value);
    EXPECT_EQ(std::strtof(text.c_str(), nullptr), value) << text;
    EXPECT_EQ(static_cast<float>(std::strtod(text.c_str(), nullptr)), value) << text;
  }
}

}  // namespace
}  // namespace loco

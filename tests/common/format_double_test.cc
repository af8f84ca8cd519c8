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

}  // namespace
}  // namespace loco

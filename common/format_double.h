// FormatDouble: a double as text that parses back (strtod, FlagSet) to
// exactly the same value, for numbers one process hands another (command
// lines, environment). std::to_string prints six decimals and turns 1e-7
// into "0.000000".
#pragma once

#include <string>

namespace loco {

// The shortest decimal form that reads back as `value` ("1e-07",
// "0.30000000000000004"); "inf", "-inf" or "nan" for those.
std::string FormatDouble(double value);

// The same for a float: the shortest decimal form that reads back (strtof)
// as `value`: "0.99999994", where FormatDouble(value) prints all the digits
// of its double ("0.99999994039535522").
std::string FormatFloat(float value);

}  // namespace loco

// Says: a gtest predicate for the messages the tests read, so that a
// failure prints the whole message and the part it lacks.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace loco {

// True when `text` contains every one of `parts`.
inline testing::AssertionResult Says(const std::string& text,
                                     const std::vector<std::string>& parts) {
  for (const std::string& p : parts) {
    if (text.find(p) == std::string::npos) {
      return testing::AssertionFailure() << "'" << text << "' does not say '" << p << "'";
    }
  }
  return testing::AssertionSuccess();
}

}  // namespace loco

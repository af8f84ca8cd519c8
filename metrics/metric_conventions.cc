#include "metrics/metric_conventions.h"

#include <cctype>

namespace loco {

const std::vector<double>& DurationBucketsSeconds() {
  static const std::vector<double> kBuckets{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                            0.05,   0.1,   0.25,   0.5,   1,    2.5,
                                            5,      10,    30,     60};
  return kBuckets;
}

std::string ReasonLabel(StatusCode code) {
  std::string s = StatusCodeName(code);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace loco

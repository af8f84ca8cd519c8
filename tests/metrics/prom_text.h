// PromText: the Prometheus text exposition format parsed into samples, for
// checking counters in tests. Handles what prometheus-cpp writes: "# TYPE"
// and "# HELP" lines, samples `name{k="v",...} value [timestamp]` with label
// values free of escaped quotes.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace loco::test {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

class PromText {
 public:
  static StatusOr<PromText> Parse(const std::string& text);

  // Sum of the samples called `name` whose labels include every pair of
  // `match`; 0 when none match (see Count to tell).
  double Sum(const std::string& name, const std::map<std::string, std::string>& match = {}) const;
  size_t Count(const std::string& name, const std::map<std::string, std::string>& match = {}) const;

  // Family names from "# TYPE" lines, and their types.
  const std::map<std::string, std::string>& types() const { return types_; }
  // Every name a query could use: sample names plus family names.
  std::set<std::string> Names() const;
  const std::vector<PromSample>& samples() const { return samples_; }

  // Adds another scrape's samples and families (a cluster is many targets).
  void Merge(const PromText& other);

 private:
  std::vector<PromSample> samples_;
  std::map<std::string, std::string> types_;
};

}  // namespace loco::test

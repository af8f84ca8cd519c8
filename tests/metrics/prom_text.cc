#include "tests/metrics/prom_text.h"

#include <cstdlib>
#include <sstream>

namespace loco::test {
namespace {

Status Malformed(const std::string& line, const std::string& why) {
  return InvalidArgument("malformed exposition line '" + line + "': " + why);
}

bool Matches(const PromSample& s, const std::string& name,
             const std::map<std::string, std::string>& match) {
  if (s.name != name) return false;
  for (const auto& [k, v] : match) {
    auto it = s.labels.find(k);
    if (it == s.labels.end() || it->second != v) return false;
  }
  return true;
}

}  // namespace

StatusOr<PromText> PromText::Parse(const std::string& text) {
  PromText out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, kind, name, type;
      words >> hash >> kind >> name >> type;
      if (kind == "TYPE") out.types_[name] = type;
      continue;
    }
    PromSample s;
    size_t pos = line.find_first_of("{ ");
    if (pos == std::string::npos) return Malformed(line, "no value");
    s.name = line.substr(0, pos);
    if (line[pos] == '{') {
      const size_t close = line.find('}', pos);
      if (close == std::string::npos) return Malformed(line, "unclosed label set");
      size_t i = pos + 1;
      while (i < close) {
        const size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq > close || line[eq + 1] != '"') {
          return Malformed(line, "expected k=\"v\"");
        }
        const size_t end = line.find('"', eq + 2);
        if (end == std::string::npos || end > close) return Malformed(line, "unclosed value");
        s.labels[line.substr(i, eq - i)] = line.substr(eq + 2, end - eq - 2);
        i = end + 1;
        if (i < close && line[i] == ',') ++i;
      }
      pos = close + 1;
    }
    const std::string value = line.substr(pos + 1, line.find(' ', pos + 1) - pos - 1);
    char* endp = nullptr;
    s.value = std::strtod(value.c_str(), &endp);
    if (value.empty() || *endp != '\0') return Malformed(line, "value '" + value + "'");
    out.samples_.push_back(std::move(s));
  }
  return out;
}

double PromText::Sum(const std::string& name,
                     const std::map<std::string, std::string>& match) const {
  double sum = 0;
  for (const auto& s : samples_) sum += Matches(s, name, match) ? s.value : 0;
  return sum;
}

size_t PromText::Count(const std::string& name,
                       const std::map<std::string, std::string>& match) const {
  size_t n = 0;
  for (const auto& s : samples_) n += Matches(s, name, match) ? 1 : 0;
  return n;
}

std::set<std::string> PromText::Names() const {
  std::set<std::string> names;
  for (const auto& s : samples_) names.insert(s.name);
  for (const auto& [name, type] : types_) names.insert(name);
  return names;
}

void PromText::Merge(const PromText& other) {
  samples_.insert(samples_.end(), other.samples_.begin(), other.samples_.end());
  types_.insert(other.types_.begin(), other.types_.end());
}

}  // namespace loco::test

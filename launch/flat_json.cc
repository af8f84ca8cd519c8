#include "launch/flat_json.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/format_double.h"

namespace loco {
namespace {

void SkipSpace(const std::string& s, size_t* i) {
  while (*i < s.size() && std::isspace(static_cast<unsigned char>(s[*i]))) ++*i;
}

std::optional<std::string> ParseString(const std::string& s, size_t* i) {
  if (*i >= s.size() || s[*i] != '"') return std::nullopt;
  std::string out;
  for (++*i; *i < s.size(); ++*i) {
    char c = s[*i];
    if (c == '"') {
      ++*i;
      return out;
    }
    if (c == '\\') {
      if (++*i >= s.size()) return std::nullopt;
      char e = s[*i];
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
    } else {
      out += c;
    }
  }
  return std::nullopt;
}

std::string Escape(const std::string& v) {
  std::string r;
  for (char c : v) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    r += c;
  }
  return r;
}

}  // namespace

std::optional<FlatJson> ParseFlatJson(const std::string& s) {
  FlatJson obj;
  size_t i = 0;
  SkipSpace(s, &i);
  if (i >= s.size() || s[i] != '{') return std::nullopt;
  ++i;
  SkipSpace(s, &i);
  if (i < s.size() && s[i] == '}') return obj;
  while (i < s.size()) {
    SkipSpace(s, &i);
    auto key = ParseString(s, &i);
    if (!key) return std::nullopt;
    SkipSpace(s, &i);
    if (i >= s.size() || s[i] != ':') return std::nullopt;
    ++i;
    SkipSpace(s, &i);
    if (i < s.size() && s[i] == '"') {
      auto v = ParseString(s, &i);
      if (!v) return std::nullopt;
      obj[*key] = *v;
    } else {
      size_t start = i;
      while (i < s.size() && s[i] != ',' && s[i] != '}') {
        if (s[i] == '{' || s[i] == '[') return std::nullopt;
        ++i;
      }
      size_t end = i;
      while (end > start && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
      if (end == start) return std::nullopt;
      obj[*key] = s.substr(start, end - start);
    }
    SkipSpace(s, &i);
    if (i < s.size() && s[i] == ',') {
      ++i;
      continue;
    }
    if (i < s.size() && s[i] == '}') return obj;
    return std::nullopt;
  }
  return std::nullopt;
}

double JsonNumber(const FlatJson& obj, const std::string& key, double fallback) {
  auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  if (it->second == "true") return 1;
  if (it->second == "false") return 0;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  return (end && *end == '\0' && std::isfinite(v)) ? v : fallback;
}

JsonWriter& JsonWriter::Add(const std::string& key, double value) {
  char buf[64];
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", value);
  } else if (std::isfinite(value)) {
    // Round-trip precision: whoever reads the summary gets the same double.
    std::snprintf(buf, sizeof(buf), "%s", FormatDouble(value).c_str());
  } else {
    std::snprintf(buf, sizeof(buf), "null");
  }
  return AddRaw(key, buf);
}

JsonWriter& JsonWriter::Add(const std::string& key, const std::string& value) {
  return AddRaw(key, "\"" + Escape(value) + "\"");
}

JsonWriter& JsonWriter::AddRaw(const std::string& key, const std::string& json) {
  if (!body_.empty()) body_ += ",";
  body_ += "\"" + Escape(key) + "\":" + json;
  return *this;
}

}  // namespace loco

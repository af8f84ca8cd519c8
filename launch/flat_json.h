// Reads and writes the one-level JSON objects that workers print as progress
// events ({"event":"step","loss":0.5,...}). Values are kept as their JSON
// text (strings unquoted); nested objects and arrays are not supported and
// make the parse fail.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace loco {

using FlatJson = std::map<std::string, std::string>;

std::optional<FlatJson> ParseFlatJson(const std::string& line);
double JsonNumber(const FlatJson& obj, const std::string& key, double fallback);

// Builds one object, keys in insertion order.
class JsonWriter {
 public:
  JsonWriter& Add(const std::string& key, double value);
  JsonWriter& Add(const std::string& key, const std::string& value);
  JsonWriter& AddRaw(const std::string& key, const std::string& json);
  std::string str() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

}  // namespace loco

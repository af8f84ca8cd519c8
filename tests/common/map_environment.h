// MapEnvironment: an environment for FlagSet::Parse read from a map, so that
// a test sets exactly the variables it names and nothing of its own.
#pragma once

#include <functional>
#include <map>
#include <string>

namespace loco {

// Looks names up in `env` (variable -> value); a name it lacks is unset.
// `env` must outlive the returned function.
inline std::function<const char*(const char*)> MapEnvironment(
    const std::map<std::string, std::string>& env) {
  return [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace loco

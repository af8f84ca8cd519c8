// FlagSet: every setting of a binary is a command-line flag with an
// environment-variable fallback and a default, declared once.
//
// Precedence: --flag=value (or --flag value) > $ENV > default. Parse() checks
// every value and returns InvalidArgument naming the flag, the bad value and
// what would be valid; it never exits. PrintHelp() lists flags, env vars and
// defaults (the README's configuration table is written from the same data).
//
// Not thread-safe; parse once at startup, then read.
//
// Source() tells where a flag's value came from, so that a binary can refuse
// a flag its other settings would ignore when the user typed it, and only
// note one that came from an environment shared by several jobs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"

namespace loco {

// Where Parse took a flag's value from.
enum class FlagSource { kDefault, kCommandLine, kEnvironment };

// The values of a flag that the program computes with as a 32-bit float:
// [min, max], or (min, max] when min_excluded.
struct FloatRange {
  float min = 0;
  float max = 0;
  bool min_excluded = false;
};

class FlagSet {
 public:
  explicit FlagSet(std::string program) : program_(std::move(program)) {}

  // Each Add* binds `*out` (which must outlive Parse) and sets it to the default.
  void AddString(const std::string& name, const std::string& env, std::string def,
                 const std::string& help, std::string* out);
  // A string that `check` accepts (as common/host_port.h's CheckHostPort): a
  // given value it refuses is refused with its message. The default is not
  // checked, so that an empty default can stand for "not given".
  void AddString(const std::string& name, const std::string& env, std::string def,
                 const std::string& help, std::function<Status(const std::string&)> check,
                 std::string* out);
  void AddInt(const std::string& name, const std::string& env, int64_t def, int64_t min,
              int64_t max, const std::string& help, int64_t* out);
  void AddDouble(const std::string& name, const std::string& env, double def, double min,
                 double max, const std::string& help, double* out);
  // A number the program rounds to a 32-bit float (static_cast<float>) and
  // computes with: `range` is checked on the rounded value, so that a value
  // that passes is one the float keeps in range (0.99999999 is 1 as a float:
  // a beta2 check in double would pass it and the program refuse it). *out
  // keeps the value as given, to be rounded alike by its user.
  void AddFloat(const std::string& name, const std::string& env, double def, FloatRange range,
                const std::string& help, double* out);
  void AddBool(const std::string& name, const std::string& env, bool def,
               const std::string& help, bool* out);
  // A string restricted to `choices`.
  void AddEnum(const std::string& name, const std::string& env, std::string def,
               std::vector<std::string> choices, const std::string& help, std::string* out);

  // Parses argv (argv[0] skipped) then the environment for flags not given.
  // Sets *help_requested when --help is present (and parses nothing else).
  Status Parse(int argc, char** argv, bool* help_requested);
  // Same, with an explicit environment lookup (tests).
  Status Parse(const std::vector<std::string>& args,
               const std::function<const char*(const char*)>& getenv_fn,
               bool* help_requested);

  // The command line as the server binaries take it: --print-config-markdown
  // (anywhere) prints MarkdownRows() and --help prints Help() to `out`, exit
  // code 0; a bad flag prints what is wrong to `err`, exit code 2. Returns the
  // exit code when main should return at once, nullopt when it carries on.
  std::optional<int> ParseCommandLine(int argc, char** argv, std::ostream& out,
                                      std::ostream& err);

  // Where the last Parse took `name`'s value from (kDefault for a name that
  // is not a flag, or before Parse).
  FlagSource Source(const std::string& name) const;
  // How a message names that source: "--name" or "$ENV" (empty for kDefault).
  std::string Origin(const std::string& name) const;

  std::string Help() const;
  // Markdown rows "| `program` | `--name` | `ENV` | `default` | help |" for the
  // README, one per flag that has an environment variable.
  std::string MarkdownRows() const;

 private:
  struct Flag {
    std::string name, env, def, help;
    bool is_bool = false;
    std::function<Status(const std::string&)> set;
  };
  Status Set(Flag& f, const std::string& value, const std::string& source);
  // The flag named `name`; nullptr if none.
  const Flag* Find(const std::string& name) const;
  Flag* Find(const std::string& name) {
    return const_cast<Flag*>(static_cast<const FlagSet*>(this)->Find(name));
  }
  std::string program_;
  std::vector<Flag> flags_;
  std::map<std::string, FlagSource> sources_;  // the flags Parse set, by name
};

}  // namespace loco

// FlagSet: every setting of a binary is a command-line flag with an
// environment-variable fallback and a default, declared once.
//
// Precedence: --flag=value (or --flag value) > $ENV > default. Parse() checks
// every value and returns InvalidArgument naming the flag, the bad value and
// what would be valid; it never exits. PrintHelp() lists flags, env vars and
// defaults (the README's configuration table is written from the same data).
//
// Conventions a caller may rely on:
//   - A flag given more than once takes its last value (so that a wrapper can
//     append an override to a command line it was handed).
//   - An environment variable that is set but empty counts as unset: the
//     default applies (so that `LOCO_X=` in a shared environment, or an empty
//     value in a manifest, clears a setting rather than being an error).
//   - Numbers are plain decimal: integers are digits with an optional leading
//     '-'; other numbers may add a '.' and an exponent (1e-3). A leading '+',
//     spaces and hexadecimal (0x10, 0x1p3) are refused, saying so.
//   - A value refused from the environment is named as "$ENV (for --flag)".
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
  // How a refusal of `name`'s value names it: "$ENV (for --name)" when the
  // last Parse took the value from the environment, so that the user is sent
  // to where it came from; "--name" otherwise (typed, or the default).
  std::string Named(const std::string& name) const;
  // `name` with the value it took, for a refusal that weighs two settings:
  // "$ENV=value (for --name)" from the environment, "--name value" otherwise.
  std::string NamedWithValue(const std::string& name, const std::string& value) const;
  // `message` (a refusal by code that knows options, not flags: TLS files,
  // option structs) with " (set in the environment: $ENV for --name, ...)"
  // added for each flag it names as "--name" whose value the last Parse took
  // from the environment and whose variable it does not name already;
  // unchanged when there is none.
  std::string WithEnvironmentSources(const std::string& message) const;

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

// A flag that takes effect under some of the other settings only
// (loco-worker's --bits with a block codec): `ignored_because` says why the
// parsed settings ignore it, or is empty when they do not.
struct FlagCondition {
  const char* name;
  std::function<std::string()> ignored_because;
};

// The flags of `conditions` that the settings `flags` parsed would ignore.
// One typed on the command line is refused: InvalidArgument naming it, why
// it has no effect and what to do, for the first in `conditions`' order. One
// read from the environment, which several jobs may share, is not an error:
// a line saying so is appended to *notes for the caller to log. A flag left
// at its default says nothing.
[[nodiscard]] Status CheckFlagsTakeEffect(const FlagSet& flags,
                                          const std::vector<FlagCondition>& conditions,
                                          std::vector<std::string>* notes);

}  // namespace loco

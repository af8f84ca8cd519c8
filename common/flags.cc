#include "common/flags.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "common/format_double.h"

namespace loco {
namespace {

// Numbers are written in plain decimal: strtoll and strtod alone would also
// take leading spaces, a '+' and (strtod) hexadecimal floats such as 0x1p3,
// forms no documented value uses and a typo is more likely to produce.
// An optional '-', then digits.
bool IsPlainInteger(const std::string& s) {
  size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// An optional '-', digits with an optional '.' (at least one digit in all),
// then an optional exponent: 'e' or 'E', an optional sign and digits.
bool IsPlainDecimal(const std::string& s) {
  size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
  auto digits = [&s, &i] {
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - start;
  };
  size_t mantissa = digits();
  if (i < s.size() && s[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

// What a refusal adds when the text is not in the form above.
constexpr const char* kIntegerForm =
    ", written in plain decimal (digits with an optional leading '-'; no '+', spaces or hex)";
constexpr const char* kDecimalForm =
    ", written in plain decimal with an optional exponent (such as 0.001 or 1e-3; no '+', "
    "spaces or hex)";

bool ParseInt(const std::string& s, int64_t* out) {
  if (!IsPlainInteger(s)) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end == nullptr || *end != '\0') return false;
  *out = v;
  return true;
}

bool ParseDouble(const std::string& s, double* out) {
  if (!IsPlainDecimal(s)) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == nullptr || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// `x` as static_cast<float> rounds it; an infinity of its sign beyond
// float's range, where the cast is undefined.
float RoundToFloat(double x) {
  constexpr float kInfinity = std::numeric_limits<float>::infinity();
  if (std::fabs(x) > std::numeric_limits<float>::max()) return x > 0 ? kInfinity : -kInfinity;
  return static_cast<float>(x);
}

// AddFloat's setter: `v` into *out (as given) when its float is in `range`.
Status SetFloat(const std::string& v, FloatRange range, double* out) {
  double x = 0;
  const bool parsed = ParseDouble(v, &x);
  const float f = RoundToFloat(x);
  const bool above_min = range.min_excluded ? f > range.min : f >= range.min;
  if (parsed && above_min && f <= range.max) {
    *out = x;
    return Status::Ok();
  }
  // The bounds as floats read back (FormatDouble of a float prints every
  // digit of its double).
  std::string m = std::string("expected a number in ") + (range.min_excluded ? "(" : "[") +
                  FormatFloat(range.min) + ", " + FormatFloat(range.max) + "]";
  if (parsed && static_cast<double>(f) != x) {
    m += " as a 32-bit float, which the program computes with; as one it is " + FormatFloat(f);
  }
  if (!IsPlainDecimal(v)) m += kDecimalForm;
  return InvalidArgument(m);
}

std::string Join(const std::vector<std::string>& v) {
  std::string r;
  for (size_t i = 0; i < v.size(); ++i) r += (i ? "|" : "") + v[i];
  return r;
}

}  // namespace

void FlagSet::AddString(const std::string& name, const std::string& env, std::string def,
                        const std::string& help, std::string* out) {
  *out = def;
  flags_.push_back({name, env, def, help, false, [out](const std::string& v) {
                      *out = v;
                      return Status::Ok();
                    }});
}

void FlagSet::AddString(const std::string& name, const std::string& env, std::string def,
                        const std::string& help, std::function<Status(const std::string&)> check,
                        std::string* out) {
  *out = def;
  flags_.push_back({name, env, def, help, false, [out, check](const std::string& v) {
                      LOCO_RETURN_IF_ERROR(check(v));
                      *out = v;
                      return Status::Ok();
                    }});
}

void FlagSet::AddInt(const std::string& name, const std::string& env, int64_t def, int64_t min,
                     int64_t max, const std::string& help, int64_t* out) {
  *out = def;
  flags_.push_back({name, env, std::to_string(def), help, false,
                    [out, min, max](const std::string& v) {
                      int64_t x = 0;
                      if (!ParseInt(v, &x) || x < min || x > max) {
                        return InvalidArgument("expected an integer in [" + std::to_string(min) +
                                               ", " + std::to_string(max) + "]" +
                                               (IsPlainInteger(v) ? "" : kIntegerForm));
                      }
                      *out = x;
                      return Status::Ok();
                    }});
}

void FlagSet::AddDouble(const std::string& name, const std::string& env, double def, double min,
                        double max, const std::string& help, double* out) {
  *out = def;
  // Bounds and default as they read back (FormatDouble): six significant
  // digits would print 0.999999999 as 1.
  flags_.push_back(
      {name, env, FormatDouble(def), help, false, [out, min, max](const std::string& v) {
         double x = 0;
         if (!ParseDouble(v, &x) || x < min || x > max) {
           return InvalidArgument("expected a number in [" + FormatDouble(min) + ", " +
                                  FormatDouble(max) + "]" +
                                  (IsPlainDecimal(v) ? "" : kDecimalForm));
         }
         *out = x;
         return Status::Ok();
       }});
}

void FlagSet::AddFloat(const std::string& name, const std::string& env, double def,
                       FloatRange range, const std::string& help, double* out) {
  *out = def;
  flags_.push_back({name, env, FormatDouble(def), help, false,
                    [out, range](const std::string& v) { return SetFloat(v, range, out); }});
}

void FlagSet::AddBool(const std::string& name, const std::string& env, bool def,
                      const std::string& help, bool* out) {
  *out = def;
  flags_.push_back({name, env, def ? "true" : "false", help, true, [out](const std::string& v) {
                      if (v == "1" || v == "true" || v == "yes") {
                        *out = true;
                      } else if (v == "0" || v == "false" || v == "no") {
                        *out = false;
                      } else {
                        return InvalidArgument("expected true|false");
                      }
                      return Status::Ok();
                    }});
}

void FlagSet::AddEnum(const std::string& name, const std::string& env, std::string def,
                      std::vector<std::string> choices, const std::string& help,
                      std::string* out) {
  *out = def;
  std::string joined = Join(choices);
  flags_.push_back({name, env, def, help + " (" + joined + ")", false,
                    [out, choices, joined](const std::string& v) {
                      for (const auto& c : choices) {
                        if (c == v) {
                          *out = v;
                          return Status::Ok();
                        }
                      }
                      return InvalidArgument("expected one of " + joined);
                    }});
}

Status FlagSet::Set(Flag& f, const std::string& value, const std::string& source) {
  Status s = f.set(value);
  if (!s.ok()) {
    return InvalidArgument(program_ + ": invalid value '" + value + "' for " + source + ": " +
                           s.message());
  }
  return Status::Ok();
}

Status FlagSet::Parse(int argc, char** argv, bool* help_requested) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return Parse(args, [](const char* n) { return std::getenv(n); }, help_requested);
}

Status FlagSet::Parse(const std::vector<std::string>& args,
                      const std::function<const char*(const char*)>& getenv_fn,
                      bool* help_requested) {
  *help_requested = false;
  sources_.clear();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      *help_requested = true;
      return Status::Ok();
    }
    if (a.rfind("--", 0) != 0) {
      return InvalidArgument(program_ + ": unexpected argument '" + a +
                             "'; flags look like --name=value (see --help)");
    }
    std::string body = a.substr(2), name = body, value;
    bool has_value = false;
    if (auto eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    Flag* flag = Find(name);
    if (flag == nullptr) {
      return InvalidArgument(program_ + ": unknown flag --" + name + " (see --help)");
    }
    if (!has_value) {
      if (flag->is_bool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return InvalidArgument(program_ + ": flag --" + name + " needs a value");
      }
    }
    LOCO_RETURN_IF_ERROR(Set(*flag, value, "--" + name));
    sources_[name] = FlagSource::kCommandLine;
  }
  for (auto& f : flags_) {
    if (sources_.count(f.name) || f.env.empty()) continue;
    const char* v = getenv_fn(f.env.c_str());
    if (v == nullptr || *v == '\0') continue;
    LOCO_RETURN_IF_ERROR(Set(f, v, "$" + f.env + " (for --" + f.name + ")"));
    sources_[f.name] = FlagSource::kEnvironment;
  }
  return Status::Ok();
}

const FlagSet::Flag* FlagSet::Find(const std::string& name) const {
  for (const auto& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

FlagSource FlagSet::Source(const std::string& name) const {
  const auto it = sources_.find(name);
  return it == sources_.end() ? FlagSource::kDefault : it->second;
}

std::string FlagSet::Origin(const std::string& name) const {
  switch (Source(name)) {
    case FlagSource::kCommandLine:
      return "--" + name;
    case FlagSource::kEnvironment:
      return "$" + Find(name)->env;
    default:
      return "";
  }
}

std::string FlagSet::Named(const std::string& name) const {
  if (Source(name) == FlagSource::kEnvironment) {
    return "$" + Find(name)->env + " (for --" + name + ")";
  }
  return "--" + name;
}

std::string FlagSet::NamedWithValue(const std::string& name, const std::string& value) const {
  if (Source(name) == FlagSource::kEnvironment) {
    return "$" + Find(name)->env + "=" + value + " (for --" + name + ")";
  }
  return "--" + name + " " + value;
}

std::string FlagSet::WithEnvironmentSources(const std::string& message) const {
  // "--tls-cert" names --tls-cert where the next character cannot continue
  // a flag's name ("--tls-cert-x" is another flag).
  auto names = [&message](const std::string& flag) {
    for (size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at + 1)) {
      const size_t end = at + flag.size();
      const char next = end < message.size() ? message[end] : ' ';
      const bool continues = std::isalnum(static_cast<unsigned char>(next)) || next == '-';
      if (!continues) return true;
    }
    return false;
  };
  std::string sources;
  for (const auto& f : flags_) {
    if (Source(f.name) != FlagSource::kEnvironment) continue;
    const std::string variable = "$" + f.env;
    if (!names("--" + f.name) || message.find(variable) != std::string::npos) continue;
    sources += (sources.empty() ? "" : ", ") + variable + " for --" + f.name;
  }
  return sources.empty() ? message : message + " (set in the environment: " + sources + ")";
}

std::string FlagSet::Help() const {
  std::ostringstream o;
  o << "usage: " << program_ << " [--flag=value ...]\n";
  for (const auto& f : flags_) {
    o << "  --" << f.name << " (env " << f.env << ", default '" << f.def << "')\n      "
      << f.help << "\n";
  }
  return o.str();
}

std::optional<int> FlagSet::ParseCommandLine(int argc, char** argv, std::ostream& out,
                                             std::ostream& err) {
  // Before Parse: printing the table needs no valid settings.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--print-config-markdown") == 0) {
      out << MarkdownRows();
      return 0;
    }
  }
  bool help = false;
  if (Status parsed = Parse(argc, argv, &help); !parsed.ok()) {
    err << parsed.message() << "\n";
    return 2;
  }
  if (help) {
    out << Help();
    return 0;
  }
  return std::nullopt;
}

std::string FlagSet::MarkdownRows() const {
  // '|' inside a cell would end it; flags without an environment variable
  // (--help-like actions) are not settings and are left out.
  auto cell = [](const std::string& text) {
    std::string r;
    for (char c : text) r += c == '|' ? std::string("\\|") : std::string(1, c);
    return r;
  };
  std::ostringstream o;
  for (const auto& f : flags_) {
    if (f.env.empty()) continue;
    o << "| `" << program_ << "` | `--" << f.name << "` | `" << f.env << "` | "
      << (f.def.empty() ? "(empty)" : "`" + cell(f.def) + "`") << " | " << cell(f.help) << " |\n";
  }
  return o.str();
}

Status CheckFlagsTakeEffect(const FlagSet& flags, const std::vector<FlagCondition>& conditions,
                            std::vector<std::string>* notes) {
  for (const FlagCondition& flag : conditions) {
    const FlagSource source = flags.Source(flag.name);
    if (source == FlagSource::kDefault) continue;
    const std::string why = flag.ignored_because();
    if (why.empty()) continue;
    if (source == FlagSource::kCommandLine) {
      return InvalidArgument("--" + std::string(flag.name) + " has no effect here: " + why +
                             "; remove it, or change the setting it depends on");
    }
    notes->push_back(flags.Origin(flag.name) + " is set but has no effect here: " + why);
  }
  return Status::Ok();
}

}  // namespace loco

#include "plan/calibration.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

namespace loco::plan {
namespace {

// The numeric fields in file order, with their keys.
std::vector<std::pair<const char*, double Calibration::*>> NumericFields() {
  return {
      {"worker_s_per_param_sample", &Calibration::worker_s_per_param_sample},
      {"worker_s_per_element", &Calibration::worker_s_per_element},
      {"server_s_per_element_payload", &Calibration::server_s_per_element_payload},
      {"server_s_per_element", &Calibration::server_s_per_element},
      {"cpu_s_per_byte", &Calibration::cpu_s_per_byte},
      {"cpu_s_per_message", &Calibration::cpu_s_per_message},
      {"step_overhead_s", &Calibration::step_overhead_s},
      {"link_efficiency", &Calibration::link_efficiency},
      {"server_fixed_bytes", &Calibration::server_fixed_bytes},
      {"server_bytes_per_element", &Calibration::server_bytes_per_element},
      {"server_delta_bytes_per_element", &Calibration::server_delta_bytes_per_element},
      {"server_push_held_fraction", &Calibration::server_push_held_fraction},
      {"server_cpu_s_per_byte", &Calibration::server_cpu_s_per_byte},
      {"server_cpu_s_per_fp32_byte", &Calibration::server_cpu_s_per_fp32_byte},
      {"server_cpu_s_per_stream_s", &Calibration::server_cpu_s_per_stream_s},
      {"server_cpu_s_per_message", &Calibration::server_cpu_s_per_message},
      {"server_cpu_s_per_element_payload", &Calibration::server_cpu_s_per_element_payload},
      {"server_cpu_s_per_element", &Calibration::server_cpu_s_per_element},
      {"rms_relative_error", &Calibration::rms_relative_error},
      {"server_cpu_rms_relative_error", &Calibration::server_cpu_rms_relative_error},
  };
}

// The whole-number fields, with their keys (written after `source`).
std::vector<std::pair<const char*, uint64_t Calibration::*>> CountFields() {
  return {{"runs", &Calibration::runs}, {"server_cpu_runs", &Calibration::server_cpu_runs}};
}

std::string Number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// Underflow is accepted: a fitted constant may be subnormal, and "%.17g"
// writes it so that strtod reads it back bit for bit (with ERANGE set).
// Overflow reads as infinity and is refused.
Status ParseNumber(const std::string& key, const std::string& text, size_t line, double* out) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < 0) {
    return InvalidArgument("line " + std::to_string(line) + ": " + key + "='" + text +
                           "' is not a finite number >= 0");
  }
  if (key == "link_efficiency" && !(v > 0 && v <= 1)) {
    return InvalidArgument("line " + std::to_string(line) + ": link_efficiency " + text +
                           " is not in (0, 1]");
  }
  *out = v;
  return Status::Ok();
}

// Stores one key's value in *c.
Status SetField(Calibration* c, const std::string& key, const std::string& value, size_t line) {
  if (key == "source") {
    c->source = value;
    return Status::Ok();
  }
  for (const auto& [name, field] : CountFields()) {
    if (key != name) continue;
    double count = 0;
    LOCO_RETURN_IF_ERROR(ParseNumber(key, value, line, &count));
    if (count != std::floor(count) || count > 1e15) {
      return InvalidArgument("line " + std::to_string(line) + ": " + key + "='" + value +
                             "' is not a whole number");
    }
    c->*field = static_cast<uint64_t>(count);
    return Status::Ok();
  }
  for (const auto& [name, field] : NumericFields()) {
    if (key == name) return ParseNumber(key, value, line, &(c->*field));
  }
  return InvalidArgument("line " + std::to_string(line) + ": unknown key '" + key + "'");
}

}  // namespace

std::string FormatCalibration(const Calibration& c) {
  std::string out =
      "# loco-plan calibration: the cost model's machine constants (plan/calibration.h),\n"
      "# fitted by `loco-plan --mode=calibrate` from measured runs. Seconds, bytes.\n";
  out += "source=" + c.source + "\n";
  for (const auto& [name, field] : CountFields()) {
    out += std::string(name) + "=" + std::to_string(c.*field) + "\n";
  }
  for (const auto& [name, field] : NumericFields()) {
    out += std::string(name) + "=" + Number(c.*field) + "\n";
  }
  return out;
}

StatusOr<Calibration> ParseCalibration(const std::string& text) {
  Calibration c;
  std::map<std::string, size_t> seen;
  std::istringstream in(text);
  std::string raw;
  size_t line = 0;
  while (std::getline(in, raw)) {
    ++line;
    if (raw.empty() || raw[0] == '#') continue;
    const size_t eq = raw.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("line " + std::to_string(line) + ": '" + raw +
                             "' is not key=value");
    }
    const std::string key = raw.substr(0, eq);
    if (auto it = seen.find(key); it != seen.end()) {
      return InvalidArgument("line " + std::to_string(line) + ": key '" + key +
                             "' repeats line " + std::to_string(it->second));
    }
    seen[key] = line;
    LOCO_RETURN_IF_ERROR(SetField(&c, key, raw.substr(eq + 1), line));
  }
  // The server CPU model's keys come as a group: a file written before it
  // existed has none of them, and reads as server_cpu_runs = 0.
  auto is_server_cpu = [](const std::string& key) { return key.rfind("server_cpu_", 0) == 0; };
  bool has_server_cpu = false;
  for (const auto& [key, at] : seen) has_server_cpu = has_server_cpu || is_server_cpu(key);
  std::vector<std::string> required = {"source"};
  for (const auto& [name, field] : CountFields()) required.emplace_back(name);
  for (const auto& [name, field] : NumericFields()) required.emplace_back(name);
  for (const std::string& key : required) {
    if (is_server_cpu(key) && !has_server_cpu) continue;
    if (!seen.count(key)) return InvalidArgument("key '" + key + "' is missing");
  }
  return c;
}

StatusOr<Calibration> ReadCalibrationFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open calibration file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  StatusOr<Calibration> c = ParseCalibration(text.str());
  if (!c.ok()) return c.status().Annotate(path);
  return c;
}

Status WriteCalibrationFile(const std::string& path, const Calibration& calibration) {
  std::ofstream out(path, std::ios::trunc);
  out << FormatCalibration(calibration);
  out.close();
  if (!out) return Unavailable("cannot write calibration file '" + path + "'");
  return Status::Ok();
}

}  // namespace loco::plan

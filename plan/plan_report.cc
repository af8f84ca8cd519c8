#include "plan/plan_report.h"

#include <cstdio>
#include <utility>
#include <vector>

namespace loco::plan {
namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string Exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// Bytes as "12.3 MB" (powers of 1000), for people.
std::string Bytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  return Fixed(bytes, u == 0 ? 0 : 2) + " " + units[u];
}

// A JSON string literal of `text` (quotes, backslashes and control
// characters escaped).
std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(ch));
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string Seconds(double s) { return s < 0.1 ? Fixed(s * 1000, 2) + " ms" : Fixed(s, 3) + " s"; }

std::string ReturnName(const ClusterSpec& spec) {
  if (spec.pull.codec != WireCodec::kBlockQuant) return EncodingName(spec.pull);
  std::string s = EncodingName(spec.pull) + " delta";
  if (spec.full_sync_every > 0) {
    s += ", a full fp32 copy every " + std::to_string(spec.full_sync_every) + " steps";
  }
  return s;
}

std::string Placement(const ClusterSpec& spec) {
  if (spec.shared_cores > 0) {
    return "every process on one host of " + std::to_string(spec.shared_cores) + " cores";
  }
  return "workers on " + std::to_string(spec.worker_cores) + "-core nodes, servers on " +
         std::to_string(spec.server_cores) + "-core nodes (" +
         std::to_string(UpdateThreads(spec)) + " apply threads)";
}

}  // namespace

std::string FormatPlanText(const PlanReport& r) {
  const ClusterSpec& s = r.spec;
  const Prediction& p = r.prediction;
  const ShardRecommendation& rec = r.recommendation;
  auto phase = [](const char* name, const Phase& ph) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "  %-9s %10s  %s\n", name, Seconds(ph.seconds).c_str(),
                  ResourceName(ph.bound));
    return std::string(buf);
  };
  std::string out;
  out += "calibration: " + r.calibration_path + "\n  (fitted on " +
         std::to_string(r.calibration.runs) + " measured runs of " + r.calibration.source +
         "; rms step error " + Fixed(100 * r.calibration.rms_relative_error, 1) + "% there)\n";
  out += r.calibration.server_cpu_runs > 0
             ? "  (server CPU fitted on the " + std::to_string(r.calibration.server_cpu_runs) +
                   " runs that measured it; rms error " +
                   Fixed(100 * r.calibration.server_cpu_rms_relative_error, 1) + "% there)\n"
             : std::string("  (no run measured server CPU: it is the step model's, unchecked)\n");
  out += "cluster: " + Exact(static_cast<double>(s.params)) + " parameters, " +
         std::to_string(s.workers) + (s.workers == 1 ? " worker node x " : " worker nodes x ") +
         std::to_string(s.gpus_per_node) + (s.gpus_per_node == 1 ? " device" : " devices") +
         ", batch " + std::to_string(s.batch_per_gpu) + " per device\n";
  out += "links: " + Exact(s.worker_link_gbps) + " Gbit/s per worker node, " +
         Exact(s.server_link_gbps) + " Gbit/s per server, each direction\n";
  out += "placement: " + Placement(s) + "\n";
  out += "codecs: push " + EncodingName(s.push) + ", return " + ReturnName(s) + "\n";
  out += "shards: " + std::to_string(p.shards) + " (largest " +
         std::to_string(p.largest_shard) + " elements)\n";
  out += "recommended shards: " + std::to_string(rec.shards) + ", the fewest within " +
         Fixed(100 * r.tolerance, 0) + "% of the fastest (" + std::to_string(rec.fastest_shards) +
         " shards, " + Seconds(rec.fastest_step_s) + "; " + std::to_string(rec.shards) +
         " shards, " + Seconds(rec.recommended.step_s) + ")\n";
  out += "step time: " + Seconds(p.step_s) + "\n";
  out += phase("compute", p.compute) + phase("push", p.push) + phase("update", p.update) +
         phase("pull", p.pull);
  char overhead[64];
  std::snprintf(overhead, sizeof(overhead), "  %-9s %10s\n", "overhead",
                Seconds(p.overhead_s).c_str());
  out += overhead;
  out += "bound by: " + std::string(ResourceName(p.bound)) + "\n";
  out += "wire bytes per step (payloads, exact):\n";
  out += "  worker    push " + Bytes(static_cast<double>(p.push_bytes_per_worker)) +
         ", pull " + Bytes(static_cast<double>(p.pull_bytes_per_worker)) + " (" +
         Bytes(p.pull_bytes_per_worker_average) + " with the full copies averaged in)\n";
  out += "  server    in " + Bytes(static_cast<double>(p.push_bytes_per_server)) + ", out " +
         Bytes(static_cast<double>(p.pull_bytes_per_server)) + " (the largest shard's)\n";
  out += "server (largest shard): " + Fixed(p.server_cpu_s, 3) + " CPU s per step (" +
         Fixed(p.server_cores_busy, 2) + " cores busy), " +
         Fixed(p.server_memory_bytes / (1024.0 * 1024 * 1024), 2) + " GiB resident\n";
  return out;
}

std::string FormatPlanJson(const PlanReport& r) {
  const Prediction& p = r.prediction;
  std::vector<std::pair<std::string, std::string>> fields = {
      {"calibration", JsonString(r.calibration_path)},
      {"shards", std::to_string(p.shards)},
      {"step_s", Exact(p.step_s)},
      {"compute_s", Exact(p.compute.seconds)},
      {"push_s", Exact(p.push.seconds)},
      {"update_s", Exact(p.update.seconds)},
      {"pull_s", Exact(p.pull.seconds)},
      {"overhead_s", Exact(p.overhead_s)},
      {"bound", JsonString(ResourceName(p.bound))},
      {"push_bytes_per_worker", std::to_string(p.push_bytes_per_worker)},
      {"pull_bytes_per_worker", std::to_string(p.pull_bytes_per_worker)},
      {"pull_bytes_per_worker_average", Exact(p.pull_bytes_per_worker_average)},
      {"push_bytes_per_server", std::to_string(p.push_bytes_per_server)},
      {"pull_bytes_per_server", std::to_string(p.pull_bytes_per_server)},
      {"server_cpu_s", Exact(p.server_cpu_s)},
      {"server_cores_busy", Exact(p.server_cores_busy)},
      {"server_memory_bytes", Exact(p.server_memory_bytes)},
      {"recommended_shards", std::to_string(r.recommendation.shards)},
      {"recommended_step_s", Exact(r.recommendation.recommended.step_s)},
      {"fastest_shards", std::to_string(r.recommendation.fastest_shards)},
      {"fastest_step_s", Exact(r.recommendation.fastest_step_s)},
  };
  std::string out = "{";
  for (size_t k = 0; k < fields.size(); ++k) {
    out += (k ? ", \"" : "\"") + fields[k].first + "\": " + fields[k].second;
  }
  return out + "}\n";
}

}  // namespace loco::plan

#include "launch/launch_summary.h"

#include <cstdio>

#include "launch/flat_json.h"

namespace loco {

std::string LaunchSummary::ToJson(const LaunchOptions& options) const {
  JsonWriter json;
  json.Add("test_accuracy", test_accuracy)
      .Add("steps", double(steps))
      .Add("wall_s", wall_s)
      .Add("first_loss", first_loss)
      .Add("final_loss", final_loss)
      .Add("servers", options.servers)
      .Add("workers", options.workers)
      .Add("codec", options.codec)
      .Add("bits", double(options.bits))
      .Add("push_wire_bytes", push_wire_bytes)
      .Add("push_fp32_bytes", push_fp32_bytes)
      .Add("pull_wire_bytes", pull_wire_bytes)
      .Add("pull_fp32_bytes", pull_fp32_bytes)
      .Add("workers_lost", workers_lost)
      .Add("workers_left", workers_left)
      .Add("workers_joined", workers_joined)
      .Add("server_restarts", server_restarts)
      .Add("server_steps_lost", double(server_steps_lost))
      .Add("coordinator_restarts", coordinator_restarts)
      .Add("coordinator_pause_s", coordinator_pause_s);
  return json.str();
}

std::string LaunchSummary::ToText() const {
  auto saved = [](double wire, double fp32) { return fp32 > 0 ? 100.0 * (1 - wire / fp32) : 0.0; };
  char buf[640];
  std::snprintf(buf, sizeof(buf),
                "finished %llu steps in %.1f s\n"
                "test accuracy: %s\n"
                "push (workers -> servers): %.1f MB on the wire vs %.1f MB in fp32 (%.1f%% saved, %.1fx)\n"
                "pull (servers -> workers): %.1f MB on the wire vs %.1f MB in fp32 (%.1f%% saved)\n"
                "total: %.1f MB vs %.1f MB (%.1f%% saved)\n",
                (unsigned long long)steps, wall_s,
                test_accuracy >= 0 ? (std::to_string(100 * test_accuracy).substr(0, 5) + "%").c_str() : "n/a",
                push_wire_bytes / 1e6, push_fp32_bytes / 1e6, saved(push_wire_bytes, push_fp32_bytes),
                push_wire_bytes > 0 ? push_fp32_bytes / push_wire_bytes : 0.0,
                pull_wire_bytes / 1e6, pull_fp32_bytes / 1e6, saved(pull_wire_bytes, pull_fp32_bytes),
                (push_wire_bytes + pull_wire_bytes) / 1e6, (push_fp32_bytes + pull_fp32_bytes) / 1e6,
                saved(push_wire_bytes + pull_wire_bytes, push_fp32_bytes + pull_fp32_bytes));
  std::string text = buf;
  if (workers_lost + workers_left + workers_joined + server_restarts + coordinator_restarts > 0) {
    char pause[64];
    std::snprintf(pause, sizeof(pause), "%.3f", coordinator_pause_s);
    text += "faults: " + std::to_string(workers_lost) + " worker(s) lost, " +
            std::to_string(workers_left) + " left, " + std::to_string(workers_joined) +
            " joined; " + std::to_string(server_restarts) + " server restart(s), about " +
            std::to_string(server_steps_lost) +
            " step(s) of shard updates lost (between a crash and its checkpoint); " +
            std::to_string(coordinator_restarts) + " coordinator restart(s), training paused " +
            pause + " s in all\n";
    for (const auto& e : events) text += "  " + e + "\n";
  }
  return text;
}

}  // namespace loco

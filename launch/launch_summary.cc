#include "launch/launch_summary.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

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

Status CheckSummaryJsonPath(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return InvalidArgument("it is a folder; expected a file path");
    if (::access(path.c_str(), W_OK) != 0) {
      return InvalidArgument("the file cannot be written (" + std::string(std::strerror(errno)) +
                             "); expected a writable file or a new one");
    }
    return Status::Ok();
  }
  if (errno != ENOENT && errno != ENOTDIR) {
    return InvalidArgument("it cannot be looked up (" + std::string(std::strerror(errno)) + ")");
  }
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "."
                             : slash == 0               ? "/"
                                                        : path.substr(0, slash);
  if (::stat(folder.c_str(), &st) != 0) {
    return InvalidArgument("its folder " + folder +
                           " does not exist; expected a file in an existing folder");
  }
  if (!S_ISDIR(st.st_mode)) {
    return InvalidArgument(folder + " is not a folder; expected a file in an existing folder");
  }
  // Search (X_OK) and write permission on the folder create a file in it.
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    return InvalidArgument("no file can be created in " + folder + " (" +
                           std::string(std::strerror(errno)) +
                           "); expected a file in a writable folder");
  }
  return Status::Ok();
}

Status WriteSummaryJson(const LaunchSummary& summary, const LaunchOptions& options,
                        const std::string& path) {
  std::FILE* out = std::fopen(path.c_str(), "w");
  if (out == nullptr) {
    return Unavailable("cannot open " + path + ": " + std::strerror(errno));
  }
  const std::string text = summary.ToJson(options) + "\n";
  const bool written = std::fwrite(text.data(), 1, text.size(), out) == text.size();
  const int write_errno = errno;
  if (std::fclose(out) != 0 || !written) {
    return Unavailable("cannot write " + path + ": " +
                       std::strerror(written ? errno : write_errno));
  }
  return Status::Ok();
}

}  // namespace loco

// LocalPrometheus: a real Prometheus server (Debian's `prometheus` binary)
// started by loco-launch on loopback, scraping every process of the local
// cluster. Targets live in a file_sd JSON file that is rewritten whenever a
// process is added (workers that join later are scraped too); Prometheus
// re-reads it every 2 s. Its data lives under `dir` and goes with it.
//
// Not thread-safe: driven by the launcher's thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "launch/child_process.h"

namespace loco {

class LocalPrometheus {
 public:
  // `binary`: path of the prometheus executable; `dir`: a folder of its own.
  LocalPrometheus(std::string binary, std::string dir);

  // A free TCP port on 127.0.0.1 (bound, read back, released). There is a
  // short window in which another process could take it; on loopback in a
  // launcher's own run that is accepted.
  static StatusOr<int> PickFreePort();
  // Finds `prometheus` on PATH (or the given path); NotFound names the package.
  static StatusOr<std::string> FindBinary(const std::string& hint);

  // Adds a scrape target and rewrites the targets file.
  Status AddTarget(const std::string& role, const std::string& name, int port);
  // Writes the configuration and starts Prometheus; waits (bounded) until it
  // accepts connections.
  Status Start(int timeout_s);
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  size_t num_targets() const { return targets_.size(); }
  // SIGTERM, then SIGKILL after the grace period.
  void Stop();

 private:
  struct Target {
    std::string role, name;
    int port;
  };
  Status WriteTargets() const;

  std::string binary_, dir_;
  int port_ = 0;
  std::vector<Target> targets_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace loco

// LocalPrometheus: a real Prometheus server (Debian's `prometheus` binary)
// started by loco-launch on loopback, scraping every process of the local
// cluster. Targets live in a file_sd JSON file that is rewritten whenever a
// process is added (workers that join later are scraped too); Prometheus
// re-reads it every 2 s. Its data lives under `dir` and goes with it.
//
// Not thread-safe: driven by the launcher's thread.
#pragma once

#include <chrono>
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
  // short window in which another process could take it: Start picks
  // again when that happens to Prometheus's port. The children's /metrics
  // ports are not picked here: each binds a free one itself
  // (--metrics-port=-1) and announces it, and the launcher adds it then.
  static StatusOr<int> PickFreePort();
  // Finds `prometheus` on PATH (or the given path); NotFound names the package.
  static StatusOr<std::string> FindBinary(const std::string& hint);

  // Adds a scrape target and rewrites the targets file. A target of the
  // same `name` (a restarted process, on the port it announced) is
  // replaced, so that Prometheus stops scraping the dead one's port.
  Status AddTarget(const std::string& role, const std::string& name, int port);
  // Writes the configuration and starts Prometheus on `port` (0: one
  // PickFreePort finds); waits (bounded by `timeout_s` in all) until it
  // answers its readiness endpoint (/-/ready), so that another server on
  // the port is never taken for it. When it exits at startup because the
  // port was taken in the window PickFreePort leaves, it is started again
  // on a newly picked port, up to kStartAttempts times in all.
  Status Start(int timeout_s, int port = 0);
  static constexpr int kStartAttempts = 3;
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
  Status WriteConfig() const;
  // One start on port_: Ok once ready; FailedPrecondition when it exited
  // because the port was in use; another error otherwise.
  Status StartOnce(std::chrono::steady_clock::time_point deadline);

  std::string binary_, dir_;
  int port_ = 0;
  std::vector<Target> targets_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace loco

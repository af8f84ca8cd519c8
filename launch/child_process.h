// ChildProcess: one child of the launcher, started with fork/exec.
//
// Its stdout is a pipe that the launcher reads line by line without blocking
// (ReadLines); its stderr goes to a log file (so a failure can be explained
// from the file's tail). The child is put in its own process group so that a
// Ctrl-C on the launcher's terminal reaches the launcher only, which then
// stops children in order.
//
// Not thread-safe: owned and driven by one thread.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace loco {

class ChildProcess {
 public:
  ChildProcess(std::string name, std::vector<std::string> argv, std::string log_path);
  ~ChildProcess();  // kills a still-running child (SIGKILL) and reaps it
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  Status Start();
  // Appends complete stdout lines read so far (non-blocking) to *lines.
  void ReadLines(std::vector<std::string>* lines);
  // Waits up to timeout_ms for one complete stdout line.
  std::optional<std::string> WaitLine(int timeout_ms);
  // Reaps without blocking; true once the child has exited.
  bool Poll();
  bool running() const { return pid_ > 0 && !exited_; }
  bool exited() const { return exited_; }
  // Exit code, or 128 + signal when killed by a signal. Valid once exited().
  int exit_code() const { return exit_code_; }
  std::string DescribeExit() const;
  // SIGTERM (unless Signal(SIGTERM) already sent one), then SIGKILL if still
  // running after grace_ms. Bounded.
  void Stop(int grace_ms);
  void Signal(int sig);

  const std::string& name() const { return name_; }
  const std::string& log_path() const { return log_path_; }
  pid_t pid() const { return pid_; }
  // Last `max_lines` lines of the stderr log.
  std::string LogTail(int max_lines) const;

 private:
  std::string name_;
  std::vector<std::string> argv_;
  std::string log_path_;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string partial_;
  bool exited_ = false;
  bool term_sent_ = false;
  int exit_code_ = 0;
};

}  // namespace loco

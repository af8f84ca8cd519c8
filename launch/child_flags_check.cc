#include "launch/child_flags_check.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>

#include "launch/child_argv.h"
#include "launch/child_process.h"

namespace loco {
namespace {

// The reason a program printed: its stderr's last line that is not empty.
std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string last;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) last = line;
  }
  return last;
}

}  // namespace

Status CheckChildFlags(const std::string& whose, std::vector<std::string> argv,
                       const std::string& log_path, int timeout_ms) {
  argv.push_back("--check-flags");
  const std::string program = argv.front().substr(argv.front().rfind('/') + 1);
  ChildProcess child("check-" + program, std::move(argv), log_path);
  LOCO_RETURN_IF_ERROR(child.Start());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<std::string> out;  // drained, so that the child never blocks on a full pipe
  while (!child.Poll()) {
    child.ReadLines(&out);
    if (std::chrono::steady_clock::now() >= deadline) {
      child.Stop(1000);
      return Internal(program + " --check-flags did not answer within " +
                      std::to_string(timeout_ms) + " ms; see " + log_path);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (child.exit_code() == 0) return Status::Ok();
  if (child.exit_code() == 2) {
    std::string reason = LastLine(log_path);
    if (reason.rfind(program + ": ", 0) == 0) reason.erase(0, program.size() + 2);
    return InvalidArgument(whose + ": " + program + " refuses them: " + reason);
  }
  return Internal(program + " --check-flags ended with " + child.DescribeExit() + "; see " +
                  log_path);
}

Status PreflightChildFlags(const LaunchOptions& options) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string folder = std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") +
                       "/loco-launch-check.XXXXXX";
  if (::mkdtemp(folder.data()) == nullptr) {
    return Internal("cannot make a folder for the children's --check-flags answers (" + folder +
                    "): " + std::strerror(errno));
  }
  LaunchOptions asked = options;
  // A kill-server fault without --checkpoint-dir gives the servers
  // LOG_DIR/checkpoints (Launcher::Run), which does not exist yet: a path
  // in this folder stands in for it (--check-flags creates no folder).
  const bool kills_a_server =
      std::any_of(options.faults.begin(), options.faults.end(),
                  [](const Fault& fault) { return fault.kind == Fault::Kind::kKillServer; });
  if (kills_a_server && asked.checkpoint_dir.empty()) {
    asked.checkpoint_dir = folder + "/checkpoints";
  }
  const std::string no_coordinator = "127.0.0.1:1";
  const int timeout_ms = static_cast<int>(options.startup_timeout_s) * 1000;
  Status answer = CheckChildFlags("the servers' flags (loco-launch's and --server-args)",
                                  ServerArgv(asked, 0, no_coordinator),
                                  folder + "/check-flags-server.log", timeout_ms);
  if (answer.ok()) {
    answer = CheckChildFlags("the workers' flags (loco-launch's and --worker-args)",
                             WorkerArgv(asked, no_coordinator, asked.total_steps()),
                             folder + "/check-flags-worker.log", timeout_ms);
  }
  std::error_code removed;
  std::filesystem::remove_all(folder, removed);
  return answer;
}

}  // namespace loco

#include "launch/child_flags_check.h"

#include <chrono>
#include <fstream>
#include <thread>

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

}  // namespace loco

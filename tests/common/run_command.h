// RunCommand: runs a shell command line to its end, for the tests that
// check what a real binary prints and how it exits.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace loco {

// Runs `command` with /bin/sh, appends what it writes to standard output to
// *output (add "2>&1" to the command for both streams) and returns its exit
// code; -1 when it could not start or did not exit (a signal). Blocks until
// it ends: bound it with timeout(1) in the command.
inline int RunCommand(const std::string& command, std::string* output) {
  std::FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return -1;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) output->append(buf.data(), n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace loco

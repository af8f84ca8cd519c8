#include "launch/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

namespace loco {

ChildProcess::ChildProcess(std::string name, std::vector<std::string> argv, std::string log_path)
    : name_(std::move(name)), argv_(std::move(argv)), log_path_(std::move(log_path)) {}

ChildProcess::~ChildProcess() {
  if (running()) {
    Signal(SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

Status ChildProcess::Start() {
  if (argv_.empty()) return InvalidArgument(name_ + ": empty command");
  if (::access(argv_[0].c_str(), X_OK) != 0) {
    return NotFound(name_ + ": cannot execute " + argv_[0] + ": " + std::strerror(errno) +
                    " (build first: scripts/build.sh, or pass --bin-dir)");
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + std::strerror(errno));
  int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    ::close(out[0]);
    ::close(out[1]);
    return Internal("cannot open log " + log_path_ + ": " + std::strerror(errno));
  }
  std::vector<char*> args;
  for (auto& a : argv_) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Internal(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    ::dup2(out[1], 1);
    ::dup2(log_fd, 2);
    ::execv(args[0], args.data());
    _exit(127);
  }
  ::close(out[1]);
  ::close(log_fd);
  stdout_fd_ = out[0];
  ::fcntl(stdout_fd_, F_SETFL, ::fcntl(stdout_fd_, F_GETFL) | O_NONBLOCK);
  pid_ = pid;
  return Status::Ok();
}

void ChildProcess::ReadLines(std::vector<std::string>* lines) {
  if (stdout_fd_ < 0) return;
  char buf[65536];
  for (int i = 0; i < 64; ++i) {  // bounded: at most 4 MiB per call
    ssize_t r = ::read(stdout_fd_, buf, sizeof(buf));
    if (r <= 0) break;
    partial_.append(buf, static_cast<size_t>(r));
  }
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines->push_back(partial_.substr(start, nl - start));
  }
  partial_.erase(0, start);
}

std::optional<std::string> ChildProcess::WaitLine(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<std::string> lines;
  while (true) {
    ReadLines(&lines);
    if (!lines.empty()) {
      // Put back the lines after the first for later readers.
      std::string rest;
      for (size_t i = 1; i < lines.size(); ++i) rest += lines[i] + "\n";
      partial_ = rest + partial_;
      return lines.front();
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0 || Poll()) return std::nullopt;
    pollfd p{stdout_fd_, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<long>(left, 100)));
  }
}

bool ChildProcess::Poll() {
  if (pid_ <= 0 || exited_) return exited_;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  return exited_;
}

std::string ChildProcess::DescribeExit() const {
  if (!exited_) return "still running";
  if (exit_code_ > 128) return "killed by signal " + std::to_string(exit_code_ - 128) + " (" +
                               strsignal(exit_code_ - 128) + ")";
  return "exit code " + std::to_string(exit_code_);
}

void ChildProcess::Signal(int sig) {
  if (!running()) return;
  if (sig == SIGTERM) term_sent_ = true;
  ::kill(pid_, sig);
}

void ChildProcess::Stop(int grace_ms) {
  if (!running()) return;
  // One SIGTERM only: a second one may land while the child is already
  // shutting down and be taken as a request to die at once.
  if (!term_sent_) Signal(SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (Poll()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Signal(SIGKILL);
  int st = 0;
  if (::waitpid(pid_, &st, 0) == pid_) {
    exited_ = true;
    exit_code_ = 128 + SIGKILL;
  }
}

std::string ChildProcess::LogTail(int max_lines) const {
  std::ifstream in(log_path_);
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(line);
    if (static_cast<int>(tail.size()) > max_lines) tail.pop_front();
  }
  std::string r;
  for (auto& l : tail) r += "    " + l + "\n";
  return r;
}

}  // namespace loco

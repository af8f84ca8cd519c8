#include "common/termination_watch.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>

namespace loco {
namespace {

sigset_t TerminationSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Read end and write end of the self-pipe; -1 until Install().
std::atomic<int> g_pipe_read{-1};
std::atomic<int> g_pipe_write{-1};

void OnSignal(int sig) {
  const int fd = g_pipe_write.load();
  if (fd < 0) return;
  const unsigned char b = static_cast<unsigned char>(sig);
  const int saved = errno;
  if (::write(fd, &b, 1) < 0) {
    // Nothing to do in a handler; the pipe being full means a signal is queued.
  }
  errno = saved;
}

// Waits at most `poll` for a termination signal, pending (blocked threads) or
// caught by the handler (threads that do not block it). Returns its number,
// or 0 when none came.
int PollOnce(std::chrono::milliseconds poll) {
  const sigset_t set = TerminationSet();
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(poll.count() / 1000);
  ts.tv_nsec = static_cast<long>((poll.count() % 1000) * 1000000);
  // EAGAIN: poll elapsed; EINTR: another signal interrupted the wait.
  int sig = sigtimedwait(&set, nullptr, &ts);
  unsigned char b = 0;
  const int fd = g_pipe_read.load();
  if (sig <= 0 && fd >= 0 && ::read(fd, &b, 1) == 1) sig = b;
  return sig > 0 ? sig : 0;
}

}  // namespace

Status TerminationWatch::Install() {
  sigset_t set = TerminationSet();
  const int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr);
  if (rc != 0) return Internal(std::string("pthread_sigmask: ") + std::strerror(rc));
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Internal(std::string("pipe: ") + std::strerror(errno));
  }
  g_pipe_read = fds[0];
  g_pipe_write = fds[1];
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGINT, &sa, nullptr) != 0 || sigaction(SIGTERM, &sa, nullptr) != 0) {
    return Internal(std::string("sigaction: ") + std::strerror(errno));
  }
  return Status::Ok();
}

int TerminationWatch::Wait(const std::function<bool()>& should_stop,
                           std::chrono::milliseconds poll) {
  for (;;) {
    if (should_stop && should_stop()) return 0;
    if (const int sig = PollOnce(poll); sig > 0) return sig;
  }
}

TerminationWatch::~TerminationWatch() { Stop(); }

void TerminationWatch::Start(std::function<void(int)> on_signal) {
  if (thread_.joinable()) return;
  on_signal_ = std::move(on_signal);
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void TerminationWatch::Stop() {
  stop_ = true;
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void TerminationWatch::Run() {
  // A short poll so that Stop() is noticed promptly.
  constexpr std::chrono::milliseconds kPoll{100};
  while (!stop_) {
    if (const int sig = PollOnce(kPoll); sig > 0) {
      if (on_signal_) on_signal_(sig);
      return;
    }
  }
}

}  // namespace loco

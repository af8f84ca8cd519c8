#include "server/termination_signals.h"

#include <pthread.h>

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

}  // namespace

Status BlockTerminationSignals() {
  sigset_t set = TerminationSet();
  int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr);
  if (rc != 0) return Internal(std::string("pthread_sigmask: ") + std::strerror(rc));
  return Status::Ok();
}

int WaitForTermination(const std::function<bool()>& should_stop,
                       std::chrono::milliseconds poll) {
  sigset_t set = TerminationSet();
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(poll.count() / 1000);
  ts.tv_nsec = static_cast<long>((poll.count() % 1000) * 1000000);
  for (;;) {
    if (should_stop && should_stop()) return 0;
    int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig > 0) return sig;
    // EAGAIN: poll elapsed; EINTR: another signal interrupted the wait.
  }
}

}  // namespace loco

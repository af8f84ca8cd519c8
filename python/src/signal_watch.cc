#include "signal_watch.h"

#include <future>
#include <thread>

#include "gil.h"

namespace loco::python {

bool PythonSignalRaised() {
  GilTaken gil;
  return PyErr_CheckSignals() != 0;
}

bool WaitWatchingSignals(const std::function<bool(std::chrono::milliseconds)>& finished,
                         const std::function<void()>& on_raise) {
  while (!finished(kSignalCheckPeriod)) {
    if (PythonSignalRaised()) {
      on_raise();
      return true;
    }
  }
  return false;
}

WatchedCall CallWatchingSignals(const std::function<Status()>& call,
                                const std::function<void()>& on_raise,
                                const std::atomic<bool>* park_when_done) {
  WatchedCall watched;
  std::promise<void> finished;
  std::future<void> done = finished.get_future();
  GilReleased released;
  std::thread calling([&] {
    watched.status = call();
    finished.set_value();
  });
  const auto returned = [&](std::chrono::milliseconds slice) {
    return done.wait_for(slice) == std::future_status::ready;
  };
  watched.raised = WaitWatchingSignals(returned, on_raise);
  if (watched.raised) {
    while (!returned(kSignalCheckPeriod)) on_raise();
  }
  calling.join();
  if (park_when_done != nullptr && park_when_done->load()) ParkUntilExit();
  return watched;
}

}  // namespace loco::python

#include "gil.h"

#include <chrono>
#include <thread>

namespace loco::python {
namespace {

// The thread state that this thread's innermost GilReleased let go of;
// null outside one.
thread_local PyThreadState* released_state = nullptr;

// Takes back the state of this thread's innermost GilReleased, if any, and
// returns it (null: none). Until GilTaken gives it back, none is recorded:
// a GilTaken nested in this one goes to PyGILState_Ensure, which sees that
// the GIL is held already.
PyThreadState* TakeBackReleasedState() {
  PyThreadState* const state = released_state;
  if (state == nullptr) return nullptr;
  RestoreThreadOrPark(state);
  released_state = nullptr;
  return state;
}

}  // namespace

void ParkUntilExit() {
  while (true) std::this_thread::sleep_for(std::chrono::hours(1));
}

// The handlers below catch everything: the CPython calls they wrap throw
// no C++ exception, so what reaches them is the forced unwind of
// pthread_exit (abi::__forced_unwind). Not caught by that name: it has no
// object, and binding a reference to it is undefined behaviour (UBSan says
// so). The handler never returns, so the unwind is neither ended nor
// resumed (see ParkUntilExit).
void RestoreThreadOrPark(PyThreadState* state) noexcept {
  try {
    PyEval_RestoreThread(state);
  } catch (...) {
    ParkUntilExit();
  }
}

PyObject* CallOrPark(PyObject* callable, PyObject* arg) noexcept {
  try {
    return PyObject_CallFunctionObjArgs(callable, arg, nullptr);
  } catch (...) {
    ParkUntilExit();
  }
}

GilReleased::GilReleased() : state_(PyEval_SaveThread()), outer_(released_state) {
  released_state = state_;
}

GilReleased::~GilReleased() {
  released_state = outer_;
  RestoreThreadOrPark(state_);
}

GilTaken::GilTaken() : restored_(TakeBackReleasedState()) {
  if (restored_ != nullptr) return;
  try {
    ensured_ = PyGILState_Ensure();
  } catch (...) {
    ParkUntilExit();
  }
}

GilTaken::~GilTaken() {
  if (restored_ != nullptr) {
    PyEval_SaveThread();
    released_state = restored_;
  } else {
    PyGILState_Release(ensured_);
  }
}

}  // namespace loco::python

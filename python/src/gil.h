// The GIL, let go of and taken back by code that a daemon thread may be
// running when the interpreter exits: every wait of python/src uses these
// instead of pybind11's gil_scoped_release and gil_scoped_acquire.
//
// Why: once Py_FinalizeEx has begun (after the atexit handlers), CPython
// ends any other thread that tries to take the GIL inside that very call
// (PyThread_exit_thread, up to 3.13; 3.14 hangs it there instead). On glibc,
// pthread_exit unwinds the thread's stack as an exception would, and the
// first destructor it meets (noexcept: ~gil_scoped_release itself), or a
// std::thread still joinable (CallWatchingSignals'), calls std::terminate:
// the process aborts with "terminate called without an active exception"
// instead of exiting with the script's status. Here such a thread is
// parked instead: it sleeps until the process exits and nothing on its
// stack is destroyed, so a thread of the client library that still writes
// there (a call's result) writes to live memory. What it holds stays held
// (its Worker's call slot: WorkerHandle::Close does not wait for it then).
//
// Thread safety: per thread, as the CPython calls they wrap.
#pragma once

#include <Python.h>

namespace loco::python {

// Py_FinalizeEx has begun (the atexit handlers have run): a thread other
// than the finalizing one that takes the GIL from now on is parked.
inline bool InterpreterFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Sleeps until the process exits. For a handler of abi::__forced_unwind
// around a CPython call that may take the GIL back: a handler that
// returned would end the unwind (glibc then aborts: "exception not
// rethrown"), and one that rethrew would go on destroying this thread's
// frames (std::terminate), so this one never ends. The thread does not hold
// the GIL then (CPython drops it before it ends the thread), and its thread
// state is never touched again.
[[noreturn]] void ParkUntilExit();

// callable(arg) (PyObject_CallFunctionObjArgs: a new reference, or null
// with the exception set), for Python code called from C++ on a thread
// that may be a daemon thread: that code may let go of the GIL (time.sleep,
// torch) and take it back while the interpreter finalizes; the thread is
// then parked inside this call, before any destructor of its caller runs
// without the GIL (a py::object's: a fatal error). Call with the GIL held.
PyObject* CallOrPark(PyObject* callable, PyObject* arg) noexcept;

// PyEval_RestoreThread(state), or, when the interpreter is finalizing and
// this is not the finalizing thread, never returns (ParkUntilExit).
// `state` may point to freed memory by then (Py_FinalizeEx frees the other
// threads' states): CPython's check reads no more than the pointer.
void RestoreThreadOrPark(PyThreadState* state) noexcept;

// Lets go of the GIL for its scope (PyEval_SaveThread), as
// py::gil_scoped_release does, and takes it back with RestoreThreadOrPark.
// Construct with the GIL held; destroyed on the same thread.
class GilReleased {
 public:
  GilReleased();
  ~GilReleased();
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  PyThreadState* const state_;
  PyThreadState* const outer_;  // the enclosing GilReleased's on this thread, or null
};

// Holds the GIL for its scope on a thread that does not, as
// py::gil_scoped_acquire does. Inside a GilReleased of this thread (every
// use in python/src: a call that waits), it takes back that thread state
// with RestoreThreadOrPark. Elsewhere it falls back on PyGILState_Ensure,
// which is not safe once finalization is over (it then makes a new thread
// state for an interpreter that is gone).
class GilTaken {
 public:
  GilTaken();
  ~GilTaken();
  GilTaken(const GilTaken&) = delete;
  GilTaken& operator=(const GilTaken&) = delete;

 private:
  // Not PyGILState_Ensure's: this thread's state, taken back, or null.
  PyThreadState* const restored_;
  PyGILState_STATE ensured_ = PyGILState_UNLOCKED;  // when restored_ is null
};

}  // namespace loco::python

"""The C++ library's log lines, delivered to ``logging.getLogger("loco_ps")``.

The client library under loco_ps._core logs (common/log.h) from whichever
thread it runs on: a call's, gRPC's, the heartbeat's. By default it writes
to fd 2, which ``logging`` cannot filter and Jupyter does not show. From
``import loco_ps`` on, its lines go to the ``loco_ps`` logger instead
(I, W, E as INFO, WARNING, ERROR), so they behave as any library's:
warnings and errors show through logging's last-resort handler when the
program configured nothing, and
``logging.getLogger("loco_ps").setLevel(logging.ERROR)`` silences the
warnings.

How: the C++ sink only queues each line (loco_ps._core._log_*; it never
takes the GIL: the logging thread may hold locks that a Python thread,
blocked in the library with the GIL, waits for). A daemon thread of ours,
``loco_ps-native-log``, waits for lines in C++ with the GIL released and
hands them to logging, with the time at which they were logged; it starts
with the first Worker. A full queue (10000 lines) drops its oldest and
says how many in a warning.

``set_native_log("stderr")`` (or ``LOCO_PS_NATIVE_LOG=stderr`` in the
environment at import) puts back the raw fd-2 lines: for a process that
may hang with the GIL held, whose queued lines no Python thread could
deliver.
"""

import atexit
import logging
import os
import threading
import traceback

LOGGER = logging.getLogger("loco_ps")
ENVIRONMENT = "LOCO_PS_NATIVE_LOG"
_DESTINATIONS = ("logging", "stderr")
_LEVELS = (logging.INFO, logging.WARNING, logging.ERROR)  # by the C++ LogLevel
_JOIN_TIMEOUT_S = 2.0


class _Relay:
    """The deliverer. start() routes the lines to the queue, stop() puts
    fd 2 back and delivers what was queued. The thread that delivers starts
    with the first Worker (worker_made): only a Worker's code logs, and a
    process that merely imports loco_ps stays single-threaded (os.fork in
    it, as multiprocessing and DataLoader workers do, raises no warning)."""

    def __init__(self):
        self._switching = threading.Lock()  # start, stop and the thread's start
        # One batch handed to logging at a time, so that lines stay in order
        # whichever thread (ours, flush's caller) takes the next batch.
        self._delivering = threading.Lock()
        self._thread = None
        self._worker_made = False
        self.active = False

    def start(self):
        with self._switching:
            if self.active:
                return
            _core._log_start()
            self.active = True
            self._start_thread_if_needed()

    def stop(self):
        with self._switching:
            if not self.active:
                return
            self.active = False
            _core._log_stop()  # fd 2 from now on; our thread's wait returns False
            self.flush()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            # Bounded: a logging handler that blocks must not hang the exit.
            thread.join(_JOIN_TIMEOUT_S)

    def worker_made(self):
        with self._switching:
            self._worker_made = True
            self._start_thread_if_needed()

    def flush(self):
        """Hands every line queued so far to logging, on this thread."""
        with self._delivering:
            lines, dropped = _core._log_take()
            if dropped:
                LOGGER.warning("%d line(s) of the C++ library were dropped before these: at "
                               "most 10000 wait for delivery to logging", dropped)
            for level, created, message in lines:
                _emit(_LEVELS[level], created, message)

    def after_fork_in_child(self):
        # The parent's thread does not exist here, and its locks may have
        # been held at the fork: fresh ones and a fresh queue; the thread
        # comes with the child's first Worker.
        self._switching = threading.Lock()
        self._delivering = threading.Lock()
        self._thread = None
        self._worker_made = False
        if self.active:
            _core._log_start(after_fork=True)

    def _start_thread_if_needed(self):
        if self.active and self._worker_made and self._thread is None:
            self._thread = threading.Thread(target=self._deliver_until_stopped,
                                            name="loco_ps-native-log", daemon=True)
            self._thread.start()

    def _deliver_until_stopped(self):
        while _core._log_wait():
            try:
                self.flush()
            except Exception:  # a filter or handler that raised: say so, keep delivering
                traceback.print_exc()


def _emit(level, created, message):
    if not LOGGER.isEnabledFor(level):
        return
    # "_core" as the record's path: these lines come from the extension.
    record = LOGGER.makeRecord(LOGGER.name, level, "_core", 0, message, None, None)
    # The time the line was logged, not the time it was delivered.
    shift = record.created - created
    record.created = created
    record.msecs = (created - int(created)) * 1000
    record.relativeCreated -= shift * 1000
    LOGGER.handle(record)


_relay = _Relay()


def set_native_log(destination):
    """Where the C++ library's log lines go: ``"logging"`` (the default: the
    ``loco_ps`` logger, INFO, WARNING and ERROR by the line's level) or
    ``"stderr"`` (fd 2, as the programs write them: ``W 12:34:56.789
    loco] message``). Lines queued before a switch to stderr are delivered
    to logging first."""
    if destination not in _DESTINATIONS:
        raise ValueError(f"destination={destination!r}: give \"logging\" or \"stderr\"")
    if destination == "logging":
        _relay.start()
    else:
        _relay.stop()


def flush():
    """Delivers to logging, on this thread, every line logged so far."""
    if _relay.active:
        _relay.flush()


def _worker_made():
    """Called by every _core.Worker's constructor (python/src/log_relay.h)."""
    _relay.worker_made()


# Registered before loco_ps._core is imported: atexit runs its handlers
# last-registered first, so this one runs after _core's and Cluster's (which
# close the workers, whose leaving is logged) and, logging being imported
# above, before logging's own shutdown.
atexit.register(_relay.stop)
os.register_at_fork(after_in_child=_relay.after_fork_in_child)

from loco_ps import _core  # noqa: E402

if os.environ.get(ENVIRONMENT, "logging") != "stderr":
    _relay.start()

"""OverlappedStep: one cluster step run while the backward pass still runs.

The worker's overlapped step (Worker.step_overlapped) pushes each part of
the gradient as soon as it is final; it learns what is final from a compute
callback that calls ready(ready_from), meaning grads[ready_from:] is final.
Backward is driven by the user's code, not by us, so the step runs on a
background thread that the first gradient hook of a backward pass starts:

  training thread                       background thread
  ---------------                       -----------------
  backward: hook(param i) ─ mark_done ─▶ compute: waits on the condition,
            hook(param j) ─ mark_done ─▶   calls ready(begin of the longest
            ...                            suffix of parameters all done)
  opt.step() ─ finish ──────────────────▶ compute returns; the worker
            joins ◀────────────────────── finishes pushes, pulls, writes
                                           the parameters

The flat layout is in parameter order and backward finishes the last layers
first, so the finished parameters grow as a suffix of the layout. A
parameter no hook reported (not used by this backward) is synced by finish()
(None counts as zero) before compute returns; until then ready_from stays
above it, so the worker never reads it early. The worker writes the new
parameters only after compute has returned, that is after backward.

Thread safety: mark_done, finish and abort are called from the training
thread; compute runs on the background thread; the shared state is guarded
by one condition variable.
"""

import threading


class OverlappedStep:
    """Starts worker.step_overlapped on a background thread at construction;
    finish() or abort() must follow (exactly one of them)."""

    def __init__(self, worker, flat):
        self._worker = worker
        self._flat = flat
        self._cond = threading.Condition()
        self._done = [False] * len(flat)
        self._suffix = len(flat)  # parameters [suffix, n) are all done
        self._finished = False
        self._abort_reason = None
        self._result = None
        self._error = None
        self._thread = threading.Thread(target=self._run, name="loco_ps-overlapped-step",
                                        daemon=True)
        self._thread.start()

    def is_done(self, i):
        with self._cond:
            return self._done[i]

    def mark_done(self, i):
        """Parameter i's gradient is final for this step (called by its hook,
        after the flat buffer holds it)."""
        with self._cond:
            self._done[i] = True
            self._cond.notify()

    def finish(self):
        """Backward is over: syncs the gradients no hook reported, lets the
        step complete and returns its result (raising what it raised)."""
        with self._cond:
            pending = [i for i, done in enumerate(self._done) if not done]
        for i in pending:
            # Below the reported suffix: the worker does not read these yet.
            self._flat.sync_grad(i)
        with self._cond:
            self._finished = True
            self._cond.notify()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result

    def abort(self, reason):
        """Fails the step (the worker cancels what it had not pushed whole)
        and waits for the thread; returns the error the step ended with."""
        with self._cond:
            self._abort_reason = reason
            self._cond.notify()
        self._thread.join()
        return self._error

    def _run(self):
        try:
            self._result = self._worker.step_overlapped(self._compute, self._flat.grads_array,
                                                        self._flat.values_array)
        except BaseException as error:  # handed to the training thread
            self._error = error

    def _compute(self, ready):
        reported = self._flat.num_elements
        while True:
            with self._cond:
                while True:
                    while self._suffix > 0 and self._done[self._suffix - 1]:
                        self._suffix -= 1
                    ready_from = self._flat.begin(self._suffix)
                    if (self._abort_reason is not None or self._finished
                            or ready_from < reported):
                        break
                    self._cond.wait()
                if self._abort_reason is not None:
                    raise RuntimeError(self._abort_reason)
                if self._finished:
                    return
            ready(ready_from)
            reported = ready_from

"""OverlappedStep: one cluster step run while the backward pass still runs.

The step runs on a C++ thread of loco_ps._core (Worker.start_background_step):
the worker pushes each part of the gradient as soon as it is final, and
learns what is final from the marks the gradient hooks make, one per
parameter (the parts of the layout are the parameters):

  training thread                         the step's C++ thread (no GIL)
  ---------------                         ------------------------------
  backward: hook(param i) ─ mark_done ──▶ wakes when the final parameters
            hook(param j) ─ mark_done ──▶   grow as a suffix of the layout,
            ...                             reports that suffix: its shards'
                                            parts are compressed and pushed
  opt.step() ─ finish ───────────────────▶ the gradient is final; the worker
            waits (GIL released) ◀───────── finishes pushes, pulls, writes
                                             the parameters

The flat layout is in parameter order and backward finishes the last layers
first, so the finished parameters grow as a suffix of the layout. A
parameter no hook reported (not used by this backward) is synced by finish()
(None counts as zero) before the step learns that the gradient is final;
until then the reported suffix stays above it, so the worker never reads it
early. The worker writes the new parameters only after finish().

A mark is a few comparisons under a C++ mutex: the hooks never wait for the
step's thread, and that thread never waits for the interpreter (an earlier
version ran the step's computation on a Python thread, which took the GIL
from the training thread for every report).

Thread safety: mark_done, is_done, finish and abort are called from the
training thread (abort also from close()).
"""


class OverlappedStep:
    """Starts the step at construction; finish() or abort() must follow
    (exactly one of them)."""

    def __init__(self, worker, flat):
        self._flat = flat
        self._marked = 0
        self._step = worker.start_background_step(flat.grads_array, flat.values_array,
                                                  flat.begins)

    def is_done(self, i):
        return self._step.is_ready(i)

    def final_from(self):
        """The first parameter of the longest suffix of the layout marked
        final: what the step's thread may have reported to the worker, whose
        shards lying wholly in it may have been pushed. len(flat) when
        none is final (nothing was pushed)."""
        k = len(self._flat)
        while k > 0 and self._step.is_ready(k - 1):
            k -= 1
        return k

    def mark_done(self, i):
        """Parameter i's gradient is final for this step (called by its hook,
        after the flat buffer holds it)."""
        if self._step.mark_ready(i):
            self._marked += 1

    def finish(self):
        """Backward is over: syncs the gradients no hook reported, lets the
        step complete and returns its result (raising what it raised)."""
        if self._marked < len(self._flat):
            for i in range(len(self._flat)):
                if not self._step.is_ready(i):
                    # Below the reported suffix: the worker does not read it yet.
                    self._flat.sync_grad(i)
        return self._step.finish()

    def abort(self, reason):
        """Fails the step (the worker cancels what it had not pushed whole)
        and waits for it to end."""
        self._step.abort(reason)

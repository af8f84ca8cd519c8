"""FakeWorker: a one-worker stand-in for loco_ps._core.Worker, in process.

It runs the servers' AdamW (kernels/adamw_cpu.cc's order, float32) on a
master copy, so that the optimizer's Python side (flat storage, hyper
ranges, hooks, the overlapped step's threads) can be tested without a
cluster. step_overlapped and start_background_step also check the
GradientReady contract the real worker relies on: ready_from never rises,
and grads[ready_from:] is never written after it was reported final.
"""

import threading
import types

import numpy as np


def fake_workers(monkeypatch, module):
    """Makes `module._core.Worker` (loco_ps.torch's) build FakeWorkers and
    returns the list of those built, in order: empty after a constructor
    that refused before making its worker, and so before joining."""
    made = []

    def make(*args, **kwargs):
        made.append(FakeWorker(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(module, "_core", types.SimpleNamespace(Worker=make))
    return made


class ContractError(AssertionError):
    pass


class FakeWorker:
    def __init__(self, coordinator, codec="loco", bits=4, auth_token_file=None,
                 insecure=False, tls_ca=None, name=None, **advanced):
        self.coordinator = coordinator
        self.options = dict(codec=codec, bits=bits, name=name, insecure=insecure, tls_ca=tls_ca,
                            auth_token_file=auth_token_file, **advanced)
        self.num_elements = 0
        self.version = 0
        self.rank = 0
        self.world_size = 1
        self.worker_id = 1
        self.expired = False
        self.traffic = {}
        self.hyper = None
        self.hyper_calls = []
        self.ready_calls = []
        self.closed = False
        self.left = False
        self.expire_at_step = None  # the step whose push finds this worker expired
        self._calls = threading.Lock()

    def join(self, num_elements):
        self.num_elements = num_elements

    def init_parameters(self, params):
        self._check(params)
        self.master = params.copy()
        self.m = np.zeros_like(self.master)
        self.v = np.zeros_like(self.master)

    def rejoin(self, params):
        assert self.expired
        self.expired = False
        params[:] = self.master

    def set_step_hyper(self, groups):
        groups = [tuple(g) for g in groups]
        assert groups[0][0] == 0 and groups[-1][1] == self.num_elements
        for a, b in zip(groups, groups[1:]):
            assert a[1] == b[0], "ranges must be contiguous"
        self.hyper = groups
        self.hyper_calls.append(groups)

    def step(self, grads, params):
        with self._calls:
            return self._apply(grads, params)

    def step_overlapped(self, compute, grads, params):
        if not self._calls.acquire(blocking=False):
            raise RuntimeError("step_overlapped while another call is in progress")
        try:
            final = []  # (ready_from, snapshot of grads[ready_from:])
            lowest = [self.num_elements]

            def ready(ready_from):
                if ready_from > lowest[0]:
                    raise ContractError(f"ready_from rose from {lowest[0]} to {ready_from}")
                lowest[0] = ready_from
                final.append((ready_from, grads[ready_from:].copy()))

            compute(ready)
            for ready_from, snapshot in final:
                if not np.array_equal(snapshot, grads[ready_from:]):
                    raise ContractError(f"grads[{ready_from}:] changed after it was final")
            self.ready_calls.append([r for r, _ in final])
            return self._apply(grads, params)
        finally:
            self._calls.release()

    def start_background_step(self, grads, params, part_begins):
        if not self._calls.acquire(blocking=False):
            raise RuntimeError("start_background_step while another call is in progress")
        return FakeBackgroundStep(self, grads, params, list(part_begins))

    def _apply(self, grads, params):
        self._check(grads)
        self._check(params)
        if self.expire_at_step is not None and self.version == self.expire_at_step:
            self.expire_at_step = None
            self.expired = True
            from loco_ps.errors import FailedPreconditionError
            raise FailedPreconditionError("this worker expired", "FAILED_PRECONDITION")
        t = self.version + 1
        for begin, end, lr, beta1, beta2, eps, weight_decay in self.hyper:
            self._adamw(slice(begin, end), grads, t, lr, beta1, beta2, eps, weight_decay)
        params[:] = self.master
        self.version = t
        return {"step": t - 1, "resynced": False, "nonfinite": 0}

    def _adamw(self, sl, grads, t, lr, beta1, beta2, eps, weight_decay):
        f = np.float32
        step_size = f(lr / (1.0 - beta1 ** t))
        bc2_sqrt = f(np.sqrt(1.0 - beta2 ** t))
        decay = f(1.0) - f(lr) * f(weight_decay)
        g = grads[sl]
        m = f(beta1) * self.m[sl] + (f(1.0) - f(beta1)) * g
        v = f(beta2) * self.v[sl] + (f(1.0) - f(beta2)) * (g * g)
        p = self.master[sl] * decay
        self.master[sl] = p - step_size * (m / (np.sqrt(v) / bc2_sqrt + f(eps)))
        self.m[sl] = m
        self.v[sl] = v

    def _check(self, array):
        assert array.dtype == np.float32 and array.ndim == 1
        assert array.size == self.num_elements

    def leave(self):
        self.left = True

    def close(self):
        self.closed = True

    def _close_at_exit(self):
        # The real one only leaves, instead, while a call of another thread runs.
        self.close()


class FakeBackgroundStep:
    """What FakeWorker.start_background_step returns: the marks are turned
    into reports of the final suffix at once (the real step does it on its
    own thread), checked against the contract when the step finishes."""

    def __init__(self, worker, grads, params, part_begins):
        assert part_begins[0] == 0 and part_begins == sorted(part_begins)
        self._worker = worker
        self._grads = grads
        self._params = params
        self._begins = part_begins
        self._ready = [False] * len(part_begins)
        self._suffix = len(part_begins)
        self._final = []  # (ready_from, snapshot of grads[ready_from:])
        self.running = True

    @property
    def num_parts(self):
        return len(self._begins)

    def is_ready(self, part):
        return self._ready[part]

    def mark_ready(self, part):
        if self._ready[part]:
            return False
        self._ready[part] = True
        grew = False
        while self._suffix > 0 and self._ready[self._suffix - 1]:
            self._suffix -= 1
            grew = True
        if grew:
            ready_from = self._begins[self._suffix]
            self._final.append((ready_from, self._grads[ready_from:].copy()))
        return True

    def finish(self):
        assert self.running, "finish() after the step ended"
        self.running = False
        try:
            for ready_from, snapshot in self._final:
                if not np.array_equal(snapshot, self._grads[ready_from:]):
                    raise ContractError(f"grads[{ready_from}:] changed after it was final")
            self._worker.ready_calls.append([r for r, _ in self._final])
            return self._worker._apply(self._grads, self._params)
        finally:
            self._worker._calls.release()

    def abort(self, reason):
        del reason
        if self.running:
            self.running = False
            self._worker._calls.release()

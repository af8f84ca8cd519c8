"""The script of test_daemon_thread_at_exit.py: a daemon thread is blocked
in the loco_ps call that argv[1] names when the main thread returns,
closing nothing. Prints "BLOCKED" once the call has waited a while, and,
for the calls of a worker, "CALL ENDED" or "CALL RUNNING" after loco_ps's
exit handlers: whether the call is still running in the client library
then.

An object freed while the interpreter tears its modules down (after the
atexit handlers, once finalization has begun) sleeps there for
TEARDOWN_S, as a program's teardown may (a large model freed, an
extension's own finalizers): the blocked call wakes up meanwhile (to look for Ctrl-C, every
0.1 s, or at the end of its timeout) and tries to take the GIL back."""

import atexit
import socket
import sys
import threading
import time
import types

_workers = []  # the blocked call's worker, for report_call_at_exit


def report_call_at_exit():
    """Prints whether the worker's call still runs in the client library
    once loco_ps's own exit handlers have run (this one was registered
    before loco_ps was imported, so it runs after them)."""
    if _workers:
        running = any(w._call_running for w in _workers)
        print("CALL RUNNING" if running else "CALL ENDED", flush=True)


atexit.register(report_call_at_exit)

import numpy as np  # noqa: E402 (after the exit handler above, on purpose)

import loco_ps  # noqa: E402

SIZE = 5_000
BLOCKED_AFTER_S = 0.3  # how long the call waits before the main thread returns
TEARDOWN_S = 0.5


class SlowTeardown:
    def __del__(self, sleep=time.sleep):
        sleep(TEARDOWN_S)


class Closer:
    """Closes a worker when freed, as a __del__ of the program might."""

    def __init__(self, worker):
        self.worker = worker

    def __del__(self):
        self.worker.close()


class Aborter:
    """Aborts a background step when freed, as a __del__ of the program might."""

    def __init__(self, step):
        self.step = step

    def __del__(self):
        self.step.abort("freed at exit")


# In a module of its own, freed during finalization: this script's globals
# never are (the daemon thread's frame, never cleared, holds its
# function's __globals__).
_teardown = types.ModuleType("daemon_at_exit_teardown")
_teardown.slow = SlowTeardown()
sys.modules[_teardown.__name__] = _teardown

_kept = []  # what the blocked call uses, kept until exit


def loopback_port(listen):
    """A loopback port that refuses connections, or (`listen`) accepts
    them into the kernel's backlog and never answers."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    if listen:
        held.listen()
    _kept.append(held)
    return f"127.0.0.1:{held.getsockname()[1]}"


def cluster_without_server_1(init):
    """A worker of a fresh two-server cluster, joined (and initialised when
    `init`), after server-1 was killed: its init_parameters and steps wait
    for that server (for step_timeout_ms, 2 min)."""
    cluster = loco_ps.Cluster(num_servers=2, pull_codec="fp32")
    worker = cluster.worker(codec="fp32", step_timeout_ms=120_000)
    params = np.zeros(SIZE, dtype=np.float32)
    worker.join(SIZE)
    if init:
        worker.init_parameters(params)
    _workers.append(worker)
    server_1 = cluster._processes[2]  # coordinator, server-0, server-1
    server_1.kill()
    server_1.wait()
    _kept.append(cluster)
    return worker, np.ones(SIZE, dtype=np.float32), params


def compute_forever(ready):
    """A gradient computation that lets go of the GIL now and then and
    never ends."""
    while True:
        time.sleep(0.01)


def torch_step():
    """DistributedOptimizer.step, of an optimizer whose cluster lost server-1."""
    import torch
    import loco_ps.torch as lps
    cluster = loco_ps.Cluster(num_servers=2, pull_codec="fp32")
    model = torch.nn.Linear(100, 50)
    opt = lps.DistributedOptimizer(model, coordinator=cluster.coordinator, codec="fp32",
                                   insecure=True, step_timeout_ms=120_000)
    cluster._processes[2].kill()
    cluster._processes[2].wait()
    model(torch.ones(4, 100)).sum().backward()
    _kept.extend([cluster, model])
    _workers.append(opt.worker)
    return opt.step


def blocked_call(scenario):
    """The call that the daemon thread makes."""
    if scenario in ("join", "close_during_finalization"):  # retries for 5 min
        worker = loco_ps.Worker(loopback_port(listen=False), insecure=True)
        _workers.append(worker)
        if scenario == "close_during_finalization":
            # After the slow teardown: the join is parked by then.
            _teardown.closer = Closer(worker)
        return lambda: worker.join(SIZE)
    if scenario == "join_admitted":
        # Admitted by the coordinator of argv[2], whose cluster never gets
        # ready (no server): the join waits for it, a member meanwhile.
        worker = loco_ps.Worker(sys.argv[2], insecure=True, join_timeout_ms=120_000)
        return lambda: worker.join(SIZE)
    if scenario == "wait_for_cluster_step":
        # Its one RPC times out while the interpreter finalizes: the GIL is
        # taken back then.
        timeout_ms = int(1000 * (BLOCKED_AFTER_S + TEARDOWN_S / 2))
        worker = loco_ps.Worker(loopback_port(listen=True), insecure=True,
                                rpc_timeout_ms=timeout_ms, max_retries=0)
        return lambda: worker.wait_for_cluster_step(1, 60)
    if scenario == "torch_step":
        return torch_step()
    worker, grads, params = cluster_without_server_1(init=scenario != "init_parameters")
    if scenario == "init_parameters":
        return lambda: worker.init_parameters(params)
    if scenario == "step":
        return lambda: worker.step(grads, params)
    if scenario == "step_overlapped":
        return lambda: worker.step_overlapped(compute_forever, grads, params)
    if scenario in ("background_step", "abort_during_finalization"):
        step = worker.start_background_step(grads, params, [0])
        if scenario == "abort_during_finalization":
            # After the slow teardown: the finish() is parked by then.
            _teardown.aborter = Aborter(step)
        return step.finish
    raise ValueError(f"unknown scenario {scenario!r}")


def main():
    thread = threading.Thread(target=blocked_call(sys.argv[1]), daemon=True)
    thread.start()
    time.sleep(BLOCKED_AFTER_S)
    assert thread.is_alive()
    print("BLOCKED", flush=True)


if __name__ == "__main__":
    main()

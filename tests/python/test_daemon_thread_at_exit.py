"""A daemon thread blocked in a loco_ps call when the interpreter exits:
the process ends with the script's exit status, soon, without waiting for
that call. Once finalization has begun, CPython ends a thread that takes
the GIL back with pthread_exit, whose unwinding through the extension's
frames used to abort the process ("terminate called without an active
exception"); such a thread is now parked until the process exits
(python/src/gil.h). daemon_at_exit.py makes finalization last long enough
for the blocked call to wake up during it."""

import importlib.util
import os
import subprocess
import sys
import time

import pytest

from loco_ps import cluster as loco_cluster

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "daemon_at_exit.py")
RUNS = 3  # each run makes the call wake up during finalization (see SCRIPT)
# Far below the blocked calls' own timeouts (2 min for a step that waits
# for a server, 5 min for a join that retries the coordinator): an exit
# that waited for the call would not end in time.
EXIT_WITHIN_S = 30

# Each names the call the daemon thread is in (daemon_at_exit.py);
# close_during_finalization: a join, and a __del__ that closes its worker
# during finalization; abort_during_finalization: a background step's
# finish(), and a __del__ that aborts that step during finalization.
SCENARIOS = ["join", "close_during_finalization", "wait_for_cluster_step", "init_parameters",
             "step", "step_overlapped", "background_step", "abort_during_finalization",
             pytest.param("torch_step", marks=pytest.mark.skipif(
                 importlib.util.find_spec("torch") is None, reason="needs torch"))]


# The scenarios whose call waits for a server or the coordinator (not for
# its own compute): the exit handler interrupts it, and it has ended
# before the process tears down.
CALLS_ENDED_AT_EXIT = ("join", "close_during_finalization", "init_parameters", "step",
                       "torch_step", "background_step", "abort_during_finalization")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_process_exits_cleanly_while_a_daemon_thread_is_in_a_call(scenario):
    for run in range(RUNS):
        started = time.monotonic()
        try:
            done = subprocess.run([sys.executable, SCRIPT, scenario], capture_output=True,
                                  text=True, timeout=EXIT_WITHIN_S, env=dict(os.environ))
        except subprocess.TimeoutExpired as expired:
            pytest.fail(f"run {run}: no exit within {EXIT_WITHIN_S} s; stderr:\n"
                        f"{expired.stderr}")
        seconds = time.monotonic() - started
        said = f"run {run}: exit status {done.returncode}; stderr:\n{done.stderr[-3000:]}"
        lines = done.stdout.splitlines()
        assert lines[:1] == ["BLOCKED"], said  # the call was still blocked at exit
        if scenario in CALLS_ENDED_AT_EXIT:
            # Interrupted by the exit handler, not left retrying a server
            # or the coordinator while the process tears down.
            assert lines[1:] == ["CALL ENDED"], said
        assert "terminate called" not in done.stderr, said
        assert "Fatal Python error" not in done.stderr, said
        assert done.returncode == 0, said
        assert seconds < EXIT_WITHIN_S


def test_a_worker_admitted_inside_join_leaves_the_cluster_at_exit(tmp_path):
    """A daemon thread's join that the coordinator admitted and that waits
    for the cluster to get ready: at exit the worker leaves at once (the
    coordinator logs it), instead of holding its place until the heartbeat
    timeout (a minute here), and its join is interrupted."""
    coordinator = loco_cluster._Process(
        "coordinator",
        [loco_cluster.find_program("loco-coordinator"), "--host=127.0.0.1", "--port=0",
         "--num-servers=1", "--insecure", "--heartbeat-timeout-ms=60000"],
        str(tmp_path / "coordinator.log"))
    try:
        address = coordinator.wait_listening(time.monotonic() + 30)
        done = subprocess.run([sys.executable, SCRIPT, "join_admitted", address],
                              capture_output=True, text=True, timeout=EXIT_WITHIN_S,
                              env=dict(os.environ))
        said = f"exit status {done.returncode}; stderr:\n{done.stderr[-3000:]}"
        assert done.stdout == "BLOCKED\n", said
        assert done.returncode == 0, said
        log = ""
        deadline = time.monotonic() + 10
        while " left; epoch" not in log and time.monotonic() < deadline:
            time.sleep(0.05)
            log = (tmp_path / "coordinator.log").read_text(errors="replace")
        assert ") joined; epoch" in log, log
        assert " left; epoch" in log, log
    finally:
        coordinator.popen.kill()
        coordinator.popen.wait()

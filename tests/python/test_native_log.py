"""The C++ library's log lines reach Python's logging: the "loco_ps" logger,
with the line's level (I, W, E as INFO, WARNING, ERROR), delivered by the
package's own thread (started with the first Worker), filtered by the
logger's level like any library's, flushed at exit, and in a forked child
too; set_native_log("stderr") or LOCO_PS_NATIVE_LOG=stderr put back the raw
fd-2 lines."""

import logging
import os
import re
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import loco_ps
from loco_ps import _native_log

# A join that retries a closed port for about a second: the client library
# logs "Join at ...: UNAVAILABLE (...), retry 1 ..." warnings from the
# join's own thread meanwhile.
FAST_FAIL = dict(join_timeout_ms=2000, rpc_timeout_ms=1000, max_retries=2,
                 initial_backoff_ms=10, max_backoff_ms=50, retry_budget_ms=500,
                 coordinator_outage_ms=1000)
RETRY_LINE = "UNAVAILABLE"


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def join_a_closed_port():
    worker = loco_ps.Worker(f"127.0.0.1:{closed_port()}", insecure=True, codec="fp32",
                            **FAST_FAIL)
    with pytest.raises(loco_ps.ClusterError):
        worker.join(100)
    worker.close()


def library_records(caplog, level=None):
    return [r for r in caplog.records if r.name == "loco_ps"
            and (level is None or r.levelno == level)]


@pytest.fixture(autouse=True)
def delivered_before():
    """Lines of an earlier test are delivered before this one's records
    start (caplog.records holds the test's call only)."""
    _native_log.flush()


@pytest.fixture
def loco_logger():
    """The "loco_ps" logger, its level restored afterwards."""
    logger = logging.getLogger("loco_ps")
    level = logger.level
    yield logger
    logger.setLevel(level)


def test_a_warning_of_the_library_arrives_as_a_warning_of_the_loco_ps_logger(caplog):
    started = time.time()
    join_a_closed_port()
    # No flush: the package's thread delivers the lines by itself.
    deadline = time.monotonic() + 10
    while not library_records(caplog, logging.WARNING) and time.monotonic() < deadline:
        time.sleep(0.01)
    warnings = library_records(caplog, logging.WARNING)
    assert warnings, [r.getMessage() for r in caplog.records]
    retry = warnings[0]
    assert "Join at 127.0.0.1:" in retry.getMessage() and RETRY_LINE in retry.getMessage()
    assert "retry 1" in retry.getMessage()
    assert retry.levelname == "WARNING"
    # Stamped when the library logged it, not when it was delivered.
    assert started <= retry.created <= time.time()
    assert retry.threadName == "loco_ps-native-log"
    _native_log.flush()


def test_the_loco_ps_loggers_level_silences_the_librarys_warnings(caplog, capfd, loco_logger):
    loco_logger.setLevel(logging.ERROR)
    join_a_closed_port()
    _native_log.flush()
    assert library_records(caplog) == []
    # Nor were they written to fd 2 meanwhile.
    assert RETRY_LINE not in capfd.readouterr().err
    loco_logger.setLevel(logging.NOTSET)
    join_a_closed_port()
    _native_log.flush()
    assert library_records(caplog, logging.WARNING)


def test_info_lines_arrive_as_info(caplog):
    caplog.set_level(logging.INFO, logger="loco_ps")
    with loco_ps.Cluster(pull_codec="fp32") as cluster:
        with cluster.worker(codec="fp32") as worker:
            params = np.zeros(1000, dtype=np.float32)
            worker.join(params.size)
            worker.init_parameters(params)
            worker_id = worker.worker_id
    _native_log.flush()
    infos = [r.getMessage() for r in library_records(caplog, logging.INFO)]
    assert any(m.startswith(f"joined as worker {worker_id} ") for m in infos), infos
    assert any(m.startswith(f"worker {worker_id} left the cluster") for m in infos), infos


def test_set_native_log_switches_to_fd_2_and_back(caplog, capfd):
    loco_ps.set_native_log("stderr")
    try:
        assert not _native_log._relay.active
        join_a_closed_port()
        err = capfd.readouterr().err
        assert " loco] Join at 127.0.0.1:" in err and RETRY_LINE in err, err
        assert library_records(caplog) == []
    finally:
        loco_ps.set_native_log("logging")
    join_a_closed_port()
    _native_log.flush()
    assert library_records(caplog, logging.WARNING)
    assert RETRY_LINE not in capfd.readouterr().err
    with pytest.raises(ValueError, match="give \"logging\" or \"stderr\""):
        loco_ps.set_native_log("syslog")


JOIN_A_CLOSED_PORT = """
    import socket
    import loco_ps
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    worker = loco_ps.Worker(f"127.0.0.1:{port}", insecure=True, codec="fp32",
                            coordinator_outage_ms=300, join_timeout_ms=1000)
    try:
        worker.join(100)
    except loco_ps.ClusterError:
        print("REFUSED", flush=True)
"""


def run_script(script, printed="REFUSED", **environment):
    """The standard error of `script` run by this interpreter, which must
    exit with 0 after printing `printed`."""
    env = dict(os.environ, **environment)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert printed in done.stdout, done.stdout + done.stderr
    return done.stderr


def retry_lines(err):
    return [line for line in err.splitlines() if "Join at 127.0.0.1:" in line]


def test_warnings_show_without_any_logging_configuration():
    # logging's last-resort handler: the bare message on sys.stderr.
    err = run_script(JOIN_A_CLOSED_PORT)
    lines = retry_lines(err)
    assert lines and lines[0].startswith("Join at 127.0.0.1:"), err
    assert RETRY_LINE in lines[0], err


def test_the_environment_can_keep_the_raw_stderr_lines():
    err = run_script(JOIN_A_CLOSED_PORT, LOCO_PS_NATIVE_LOG="stderr")
    lines = retry_lines(err)
    assert lines and re.match(r"W \d\d:\d\d:\d\d\.\d{3} loco\] Join at ", lines[0]), err


def test_lines_logged_while_workers_close_at_exit_reach_logging():
    # The worker is left joined: _core's exit handler closes it, and its
    # "left the cluster" line is delivered before the process ends.
    script = """
        import logging
        import numpy as np
        import loco_ps
        logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
        cluster = loco_ps.Cluster(pull_codec="fp32")
        worker = cluster.worker(codec="fp32")
        params = np.ones(1000, dtype=np.float32)
        worker.join(params.size)
        worker.init_parameters(params)
        print("JOINED", flush=True)
    """
    err = run_script(script, printed="JOINED")
    assert "loco_ps INFO joined as worker" in err, err
    assert re.search(r"^loco_ps INFO worker \d+ left the cluster at step 0$", err, re.M), err


def test_the_delivering_thread_starts_with_the_first_worker():
    # Importing loco_ps starts no thread (a fork then raises no warning).
    script = """
        import threading
        import loco_ps

        def names():
            return [thread.name for thread in threading.enumerate()]

        assert "loco_ps-native-log" not in names(), names()
        worker = loco_ps.Worker("127.0.0.1:1", insecure=True, codec="fp32")
        assert "loco_ps-native-log" in names(), names()
        print("STARTED", flush=True)
    """
    run_script(script, printed="STARTED")


def test_a_forked_child_delivers_its_own_lines():
    # multiprocessing's and DataLoader's default on Linux. The parent makes
    # no Worker (gRPC must not be used on both sides of a fork).
    script = """
        import logging
        import os
        import socket
        import loco_ps
        from loco_ps import _native_log
        logging.basicConfig(format="%(process)d %(name)s %(levelname)s %(message)s")
        child = os.fork()
        if child == 0:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            worker = loco_ps.Worker(f"127.0.0.1:{port}", insecure=True, codec="fp32",
                                    coordinator_outage_ms=300, join_timeout_ms=1000)
            try:
                worker.join(100)
            except loco_ps.ClusterError:
                pass
            _native_log.flush()
            os._exit(0)
        _, status = os.waitpid(child, 0)
        print(f"CHILD {child}" if status == 0 else f"FAILED {status}", flush=True)
    """
    err = run_script(script, printed="CHILD")
    assert re.search(r"^\d+ loco_ps WARNING Join at 127\.0\.0\.1:\d+: UNAVAILABLE", err, re.M), err
